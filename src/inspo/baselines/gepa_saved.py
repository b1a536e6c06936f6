"""A GEPA run saved in a folder, read back: where it stands, without running it.

:func:`~inspo.baselines.gepa_adapter.optimize_instruction` gives GEPA a ``run_dir``, where GEPA saves
its state before every iteration (:data:`STATE_FILE`). :func:`saved_progress` reads it with GEPA's
own loader, so a stopped or running optimisation can be inspected (``evolve_vs_gepa.py
--progress``). ``gepa`` is imported only when a state is there to read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

STATE_FILE = "gepa_state.bin"  # GEPA's own name for its saved state in a run_dir


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
    return GEPAProgress(iteration=int(state.i), rollouts=int(state.total_num_evals),
                        programs=len(state.program_candidates), best_program=best,
                        best_val=float(scores[best]), seed_val=float(scores[0]))
