"""GEPA's proposals kept and judged: :class:`ProposalLog` is the GEPA callback that keeps every
text GEPA's reflection proposed and GEPA then evaluated (:class:`GEPAProposal`: its parent, the
gold answers its reflection was shown, accepted or not), and :func:`proposal_yield` says what
INSPO's guard and leak check would have made of them. GEPA has neither check, so this is how its
optimizer's yield compares with INSPO's (:mod:`inspo.baselines.gepa_adapter` runs GEPA)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inspo.core.proposer import guard, leaked_answer

COMPONENT = "instruction"  # the one text component GEPA evolves: the agent's instruction


@dataclass
class GEPAProposal:
    """One text GEPA's reflection proposed and GEPA then evaluated."""

    iteration: int
    text: str
    parent: str
    shown_answers: tuple[str, ...] = ()  # the gold answers of the records its reflection saw
    outcome: str = ""  # accepted, rejected, or "" when the run stopped before GEPA decided


class ProposalLog:
    """A GEPA callback (``gepa.optimize(callbacks=...)``) that keeps every proposal as a
    :class:`GEPAProposal`: one JSON line per proposal, per decision and per hook that failed
    (:meth:`errors`), appended to ``path`` (so the pieces of a resumed run add up), or kept in
    memory only when ``path`` is None.

    A proposal is paired with the parent and reflective records of the proposal started before it
    in the same iteration (GEPA proposes one per iteration unless told to batch several)."""

    def __init__(self, path: Path | None):
        self.path = path
        self.lines: list[dict[str, Any]] = []
        self._unwritten: list[
            str
        ] = []  # failed hooks whose line could not be written to ``path`` either
        self._started: list[dict[str, Any]] = []

    def on_iteration_start(self, event: Mapping[str, Any]) -> None:
        self._started = []

    def on_proposal_start(self, event: Mapping[str, Any]) -> None:
        with self._counted("on_proposal_start", event):
            records = event["reflective_dataset"].get(COMPONENT, ())
            shown = sorted({str(a) for r in records for a in r.get("Correct answers", ())})
            self._started.append(
                {"parent": event["parent_candidate"].get(COMPONENT, ""), "shown_answers": shown}
            )

    def on_proposal_end(self, event: Mapping[str, Any]) -> None:
        with self._counted("on_proposal_end", event):
            started = self._started.pop(0) if self._started else {"parent": "", "shown_answers": []}
            if COMPONENT in event["new_instructions"]:
                self._write(
                    {
                        "iteration": event["iteration"],
                        "text": event["new_instructions"][COMPONENT],
                        **started,
                    }
                )

    def on_candidate_accepted(self, event: Mapping[str, Any]) -> None:
        with self._counted("on_candidate_accepted", event):
            self._write({"iteration": event["iteration"], "outcome": "accepted"})

    def on_candidate_rejected(self, event: Mapping[str, Any]) -> None:
        with self._counted("on_candidate_rejected", event):
            self._write({"iteration": event["iteration"], "outcome": "rejected"})

    @contextmanager
    def _counted(self, hook: str, event: Mapping[str, Any]):
        """Count a failed hook in ``errors`` (and re-raise, for GEPA's own warning): a proposal or
        decision the log lost must reach the result, not only a log line."""
        try:
            yield
        except Exception as exc:
            error = (
                f"{hook} at iteration {event.get('iteration', '?')}: {type(exc).__name__}: {exc}"
            )
            try:
                self._write({"iteration": event.get("iteration"), "log_error": error})
            except OSError:
                self._unwritten.append(error)
            raise

    def errors(self) -> list[str]:
        """Every failed hook of the run, all pieces of a resumed one (from ``path``), and those of
        this piece whose line could not be written there."""
        return [line["log_error"] for line in self._read() if "log_error" in line] + self._unwritten

    def _write(self, line: dict[str, Any]) -> None:
        if self.path is None:
            self.lines.append(line)
        else:
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(line) + "\n")

    def proposals(self) -> list[GEPAProposal]:
        """Every proposal with its decision, from ``path`` (all pieces of the run) or memory. An
        iteration proposed again (a stopped run resumes from the state saved before it) keeps only
        its last proposal, the one GEPA's saved state goes on from."""
        by_iteration: dict[int, GEPAProposal] = {}
        for line in self._read():
            if "text" in line:
                by_iteration[line["iteration"]] = GEPAProposal(
                    line["iteration"], line["text"], line["parent"], tuple(line["shown_answers"])
                )
            elif "outcome" in line and line["iteration"] in by_iteration:
                by_iteration[line["iteration"]].outcome = line["outcome"]
        return list(by_iteration.values())

    def _read(self) -> list[dict[str, Any]]:
        if self.path is None:
            return self.lines
        if not self.path.is_file():
            return []
        return [
            json.loads(line)
            for line in self.path.read_text(encoding="utf-8").splitlines()
            if line.strip()
        ]


def proposal_yield(
    proposals: Sequence[GEPAProposal], tags: Sequence[str], max_chars: int = 6000
) -> dict[str, Any]:
    """What INSPO's checks would have made of GEPA's proposals, in INSPO's order: the guard
    (:func:`inspo.core.proposer.guard` with ``tags``; earlier proposals count as existing ones),
    then, for those it passes, the leak check against the answers each reflection was shown. Also
    how GEPA decided each proposal, and how many it accepted that the guard would have refused."""
    refused: list[str] = []
    leaks = reach = accepted_refused = 0
    earlier: list[str] = []
    for p in proposals:
        why = guard(p.text, p.parent, earlier, max_chars, tags)
        earlier.append(p.text)
        if why is not None:
            refused.append(why)
            accepted_refused += p.outcome == "accepted"
        elif leaked_answer(p.text, p.shown_answers, p.parent) is not None:
            leaks += 1
        else:
            reach += 1
    outcomes = {k: sum(p.outcome == k for p in proposals) for k in ("accepted", "rejected")}
    return {
        "proposals": len(proposals),
        "guard_refusals": refused,
        "leaks": leaks,
        "would_verify": reach,
        **outcomes,
        "undecided": len(proposals) - sum(outcomes.values()),
        "accepted_the_guard_refuses": accepted_refused,
    }
