"""`python -m gen_tui.app.cli`: the same command as `gen-tui` (the runs it starts use it)."""

from gen_tui.app.cli.main import main

raise SystemExit(main())
