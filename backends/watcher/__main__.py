"""`python -m gen_tui.backends.watcher`: the watcher run from the installed package, the
same program gen-tui sends to `python3 -` on a GPU box (see :func:`source`)."""

import sys

from .cli import main

sys.exit(main())
