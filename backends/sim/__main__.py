"""`python -m gen_tui.backends.sim`: the same server as `gen-tui sim`."""

from gen_tui.backends.sim import main

raise SystemExit(main())
