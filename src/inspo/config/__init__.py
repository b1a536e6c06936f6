"""A run's configuration, the layer every other may import: the config records
(:mod:`inspo.config.train`: :class:`~inspo.config.train.TrainConfig`; its sections in
:mod:`inspo.config.sections`), the named
presets (:mod:`inspo.config.presets`), the paper's settings (:mod:`inspo.config.paper`), how a
preset, a file and ``--set`` overrides layer (:mod:`inspo.config.layers`,
:mod:`inspo.config.files`), the co-evolution schedule derived from a run's config
(:mod:`inspo.config.schedule`) and the trackers ``rl.report_to`` may name
(:mod:`inspo.config.trackers`).

It imports no training, evaluation or agent code (``tests/test_import_graph.py`` checks): the CLI,
the API, ``eval``, ``trained`` and the environments read settings here without climbing into
``training``.
"""
