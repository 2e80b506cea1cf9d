"""`gen-tui report`: a run's per-dataset summary from its files, as text or one HTML page."""

from gen_tui.backends.report.summary import DatasetReport, summarize

__all__ = ["DatasetReport", "summarize"]
