"""Progress as everyone reads it: the snapshot the engine publishes and its data-quality
counts, one shape for the headless table, progress.json and the panels.

Imported at start-up by the TUI: plain data, no I/O.
"""
