"""The small pieces of HTML the report's sections share (:mod:`inspo.report.html`,
:mod:`inspo.report.rounds`): the "not recorded" mark, escaping, numbers and preformatted text."""

from __future__ import annotations

import html

NOT_RECORDED = '<span class="nr">not recorded</span>'


def esc(value: object) -> str:
    """``value`` as text, HTML-escaped (every piece of run text on the page goes through it)."""
    return html.escape(str(value))


def num(value: float | None, fmt: str = "{:.3f}") -> str:
    """``value`` formatted with ``fmt``, or the "not recorded" mark for ``None``."""
    return NOT_RECORDED if value is None else fmt.format(value)


def pre(text: str | None, cls: str = "text") -> str:
    """``text`` escaped in a ``<pre>`` of class ``cls``, or the "not recorded" mark for ``None``."""
    return NOT_RECORDED if text is None else f'<pre class="{cls}">{esc(text)}</pre>'
