"""The run report: one self-contained HTML page from a run directory.

    from inspo.report import write_report
    write_report("runs/demo")            # -> runs/demo/report.html

:func:`load_run` reads a run directory into a :class:`RunData` record (see
:mod:`inspo.report.data` for what is required and what is optional);
:func:`build_report_html` renders it (pure); :func:`write_report` does both and writes the file;
:func:`write_run_report` is what a finished run calls (a report problem never fails the run).
Nothing here imports anything heavy.
"""

from inspo.report.data import load_run
from inspo.report.html import build_report_html, write_report, write_run_report
from inspo.report.records import RunData

__all__ = ["RunData", "build_report_html", "load_run", "write_report", "write_run_report"]
