"""Importing gen-tui's SSH code says nothing on stderr: with cryptography 51, asyncssh's
import warned six lines about DSA on every `gen-tui` command that reached it (a bad
recipe's one line came after them). Only asyncssh's own DSA warning is silenced."""

from __future__ import annotations

import subprocess
import sys

MODULES = ("connection", "ssh", "watch", "host_keys", "kill")
"""Every module of backends/hosts that imports asyncssh."""


def test_the_ssh_modules_import_without_a_warning() -> None:
    imports = "; ".join(f"import gen_tui.backends.hosts.{name}" for name in MODULES)
    done = subprocess.run(
        [sys.executable, "-W", "default", "-c", imports],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr


def test_other_warnings_still_show() -> None:
    code = (
        "import warnings, gen_tui.backends.hosts; "
        "warnings.warn('DSA is deprecated, says another module')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert "DSA is deprecated, says another module" in done.stderr
