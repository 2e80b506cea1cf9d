"""The command line: `gen-tui` and its subcommands (run, sim, export, verify, report, alert).

`parser.py` spells every flag, `main.py` dispatches the parsed command, and one module a
subcommand does its work; `headless.py` and `live_table.py` are `gen-tui run`'s terminal.
The TUI is started from here (`launch.py`) but lives in `app/` beside it.
"""
