"""The report's evolution-rounds section: each optimizer call with its critique, the failures it
reflected on and the candidates it proposed, then the rounds that produced nothing usable. Rules
as :mod:`inspo.report.html`'s: run text escaped, nothing guessed."""

from __future__ import annotations

from inspo.report.markup import NOT_RECORDED, esc, num, pre
from inspo.report.records import EvolutionRound, FailureExample, RunData

#: Characters of a failure's response the table shows.
RESPONSE_EXCERPT = 600


def rounds(run: RunData) -> str:
    """The section's body: each optimizer call (its critique, the failures it reflected on, the
    candidates it proposed and what became of them), then the rounds that produced nothing
    usable."""
    if not run.rounds and not run.optimizer_failures:
        return f"<p>No optimizer call in this run ({NOT_RECORDED}).</p>"
    out = []
    for r in run.rounds:
        out.append(_round(r))
    if run.optimizer_failures:
        rows = "".join(
            f"<tr><td>{f.step}</td><td>{f.round}</td><td>{esc(f.reason)}</td></tr>"
            for f in run.optimizer_failures
        )
        out.append(
            f"<h3>Rounds that produced nothing usable</h3><table><tr><th>step</th><th>round</th>"
            f"<th>reason</th></tr>{rows}</table>"
        )
    return "".join(out)


def _round(r: EvolutionRound) -> str:
    """One optimizer call: its parent, template and tokens, its critique, the failures it
    reflected on and its candidates' outcomes."""
    tokens = (
        f"{r.prompt_tokens} prompt + {r.completion_tokens} completion tokens"
        if r.prompt_tokens or r.completion_tokens
        else "tokens not recorded (offline optimizer?)"
    )
    failures = "".join(_failure_row(f) for f in r.failures) or (
        f'<tr><td colspan="6">{NOT_RECORDED}</td></tr>'
    )
    cands = (
        "".join(
            f'<tr><td>{esc(c.id)}</td><td class="status-{esc(c.status)}">{esc(c.status)}</td>'
            f"<td>{num(c.score)}</td><td>{esc(c.reason)}</td></tr>"
            for c in r.candidates
        )
        or f'<tr><td colspan="4">{NOT_RECORDED}</td></tr>'
    )
    return (
        f'<div class="round"><h3>Step {r.step}{" (initial population)" if r.step == 0 else ""}, '
        f"round {r.round}: parent {esc(r.parent_id)} "
        f"({esc(r.template)} template)</h3><p class='meta'>{esc(tokens)}</p>"
        f"<details><summary>critique</summary>{pre(r.critique or None, 'critique')}</details>"
        f"<h4>Failures reflected on ({len(r.failures)})</h4>"
        '<table class="failures"><tr><th>question</th><th>gold</th><th>answer</th><th>reward</th>'
        f"<th>from</th><th>response (excerpt)</th></tr>{failures}</table>"
        f"<h4>Candidates ({len(r.candidates)})</h4><table><tr><th>id</th><th>outcome</th>"
        f"<th>D_B score</th><th>reason</th></tr>{cands}</table></div>"
    )


def _failure_row(f: FailureExample) -> str:
    """A table row for failure ``f``: its question, gold and given answers, reward, where it came
    from, and the first ``RESPONSE_EXCERPT`` characters of the response."""
    if f.question is None:
        return (
            f"<tr><td>{esc(f.question_id)}</td><td colspan='5'>no longer in the replay buffer: "
            f"{NOT_RECORDED}</td></tr>"
        )
    response = f.response or ""
    excerpt = response[:RESPONSE_EXCERPT] + ("…" if len(response) > RESPONSE_EXCERPT else "")
    source = f"step {f.step}" + (f", {esc(f.instruction_id)}" if f.instruction_id else "")
    return (
        f"<tr><td><span class='qid'>{esc(f.question_id)}</span> {esc(f.question)}</td>"
        f"<td>{esc(' | '.join(f.gold)) or NOT_RECORDED}</td>"
        f"<td>{esc(f.answer) if f.answer is not None else '<i>none</i>'}</td>"
        f"<td>{num(f.reward, '{:.2f}')}</td><td>{source}</td>"
        f'<td><pre class="response">{esc(excerpt)}</pre></td></tr>'
    )
