"""`./dev.sh demo` on a first install: pip's progress shows, then quiet (issue 31, defect 20).

dev.sh runs against a fake .venv whose `python` records how pip was called: the test checks
what the script asks of pip and says, not pip itself (no network, no real install)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FAKE_PYTHON = """#!/bin/sh
echo "$@" >> "$(dirname "$0")/../pip-calls"
"""


def _clone(tmp_path: Path) -> Path:
    """dev.sh and a pyproject.toml in a folder of their own, with a fake .venv."""
    shutil.copy(ROOT / "dev.sh", tmp_path / "dev.sh")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name, text in (("python", FAKE_PYTHON), ("gen-tui", "#!/bin/sh\necho panel $@\n")):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return tmp_path


def _demo(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(folder / "dev.sh"), "demo"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHON": "python3"},
        check=True,
    )


def _calls(folder: Path) -> list[str]:
    calls = folder / ".venv" / "pip-calls"
    return calls.read_text().splitlines() if calls.exists() else []


def test_first_install_shows_pip_progress_and_says_it_takes_minutes(tmp_path: Path) -> None:
    folder = _clone(tmp_path)
    first = _demo(folder)
    assert "may take a few minutes" in first.stderr, first.stderr
    (call,) = _calls(folder)
    assert "pip install" in call and "--quiet" not in call, call
    assert "panel --demo" in first.stdout

    again = _demo(folder)  # installed: no pip at all, nothing said
    assert len(_calls(folder)) == 1 and "dev.sh:" not in again.stderr, again.stderr

    (folder / "pyproject.toml").write_text('[project]\nname = "y"\n')
    changed = _demo(folder)  # the same extras again: a quick update, quiet
    assert "--quiet" in _calls(folder)[-1]
    assert "few minutes" not in changed.stderr, changed.stderr
