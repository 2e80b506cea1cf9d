"""Whether a side environment can do its tests' part: a python named by a variable (built by
`.ci/run`) that has what gen-tui itself does not install (torch, a real server, a router).

One check for all of them, so each skip says the same three things the same way: the
variable is unset (and what builds it), its python cannot run, or it lacks named modules.
The modules are found with `find_spec`, never imported: importing torch alone takes seconds.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence


def side_python_problem(
    variable: str,
    python: str,
    modules: Sequence[str],
    unset: str,
    env: Mapping[str, str] | None = None,
) -> str | None:
    """Why `python` (the value of `variable`) cannot serve the tests; None: it can.

    `unset`: what the variable names and what builds it, said when it is empty. A dotted
    module imports its parent package to be found (an import error there is said too)."""
    if not python:
        return f"{variable} is not set: {unset}"
    find = (
        "from importlib.util import find_spec; "
        f"print(*[n for n in {tuple(modules)!r} if find_spec(n) is None])"
    )
    try:
        check = subprocess.run(
            [python, "-c", find], capture_output=True, text=True, timeout=60, env=env
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{variable}={python} cannot run: {exc}"
    if check.returncode != 0:
        last = (check.stderr.strip().splitlines() or ["?"])[-1]
        return f"{variable}={python} cannot run: {last}"
    if check.stdout.strip():
        return f"{variable}={python} lacks {check.stdout.strip()}"
    return None
