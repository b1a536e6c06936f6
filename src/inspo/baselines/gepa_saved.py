"""A GEPA run saved in a folder, read back: where it stands, without running it.

:func:`~inspo.baselines.gepa_adapter.optimize_instruction` gives GEPA a ``run_dir``, where GEPA
saves its state before every iteration (:data:`STATE_FILE`). :func:`saved_progress` reads it with
GEPA's own loader, so a stopped or running optimisation can be inspected (``evolve_vs_gepa.py
--progress``). ``gepa`` is imported only when a state is there to read. :class:`GEPAStreams` is
what a run saves beside GEPA's state so that a resumed run draws what an unbroken one would have.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inspo.rng import rng_from_json, rng_to_json

STATE_FILE = "gepa_state.bin"  # GEPA's own name for its saved state in a run_dir
GEPA_STOP_FILE = "gepa.stop"  # GEPA's own stop file in a run_dir (its FileStopper, always on)


@dataclass
class GEPAStreams:
    """The random streams of one GEPA optimisation, saved with its state (in the adapter's state,
    which GEPA writes before every iteration) and restored when it resumes.

    GEPA's engine restores its candidates, front and budget but builds its generator afresh from
    ``seed``; so :func:`~inspo.baselines.gepa_adapter.optimize_instruction` builds that generator
    (``rng``) and the batch sampler over it (``sampler``, GEPA's ``EpochShuffledBatchSampler``,
    whose shuffled epoch lives outside the saved state) itself, and ``llm``'s sampling stream goes
    with them where it exposes a plain ``random.Random`` as ``sampling_rng`` (the local model).
    """

    rng: random.Random  # GEPA's: minibatch shuffles and the Pareto parent choice
    sampler: Any  # gepa.strategies.batch_sampler.EpochShuffledBatchSampler over ``rng``
    llm: Any = None

    def _llm_rng(self) -> random.Random | None:
        rng = getattr(self.llm, "sampling_rng", None)
        return rng if type(rng) is random.Random else None

    def state_dict(self) -> dict[str, Any]:
        s, llm_rng = self.sampler, self._llm_rng()
        return {
            "rng": rng_to_json(self.rng.getstate()),
            "epoch": s.epoch,
            "shuffled_ids": list(s.shuffled_ids),
            "id_freqs": [[k, v] for k, v in s.id_freqs.items()],
            "last_trainset_size": s.last_trainset_size,
            "llm_rng": rng_to_json(llm_rng.getstate()) if llm_rng is not None else None,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        from collections import Counter

        s, llm_rng = self.sampler, self._llm_rng()
        self.rng.setstate(rng_from_json(state["rng"]))
        s.epoch, s.shuffled_ids = int(state["epoch"]), list(state["shuffled_ids"])
        s.id_freqs, s.last_trainset_size = (
            Counter(dict(state["id_freqs"])),
            int(state["last_trainset_size"]),
        )
        if llm_rng is not None and state.get("llm_rng"):
            llm_rng.setstate(rng_from_json(state["llm_rng"]))


@dataclass(frozen=True)
class GEPAProgress:
    """Where a GEPA run saved in a folder stands (:func:`saved_progress`)."""

    iteration: int  # GEPA's iteration counter ``i`` in the saved state
    rollouts: int  # metric calls spent: the budget used
    programs: int  # candidates kept, the seed included (so programs - 1 were accepted)
    best_program: int  # the highest validation aggregate (the first of equals, as GEPA picks)
    best_val: float
    seed_val: float  # program 0's validation aggregate


def saved_progress(run_dir: str | Path) -> GEPAProgress | None:
    """The progress in the state GEPA saved in ``run_dir`` (:data:`STATE_FILE`, read with GEPA's
    own loader; GEPA replaces the file whole, so a running optimisation can be read), or None when
    no state was saved there."""
    if not (Path(run_dir) / STATE_FILE).is_file():
        return None
    from gepa.core.state import GEPAState

    state = GEPAState.load(str(run_dir))
    scores = state.program_full_scores_val_set
    best = max(range(len(scores)), key=scores.__getitem__)
    return GEPAProgress(
        iteration=int(state.i),
        rollouts=int(state.total_num_evals),
        programs=len(state.program_candidates),
        best_program=best,
        best_val=float(scores[best]),
        seed_val=float(scores[0]),
    )
