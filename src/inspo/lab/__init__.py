"""The lab's tools, for the benchmark scripts under ``benchmarks/`` (not the library's API; they may
change with the scripts that use them):

- :mod:`inspo.lab.harness`: the scripts' conventions: ``--threads`` / ``--seed`` / ``--json``
  (:func:`~inspo.lab.harness.add_common`), the run's provenance (commit, command, machine:
  :func:`~inspo.lab.harness.start`), result files that must carry it
  (:func:`~inspo.lab.harness.write_result`), a script loaded as a module
  (:func:`~inspo.lab.harness.load_script`);
- :mod:`inspo.lab.power`: how many seeds a comparison needs, and what a number of seeds could
  have detected (the smallest effect a run states beside its result).

What users of the library need for their own results, the statistics of a paired comparison and
an evaluation's provenance, is in :mod:`inspo.eval` (``stats``, ``provenance``).
"""
