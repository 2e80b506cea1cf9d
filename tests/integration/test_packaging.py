"""A plain `pip install .` (a wheel, not an editable install) must carry all three packages
under the gen_tui namespace, the styles, and the console script."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # tests/integration/ -> the project


def test_wheel_holds_packages_styles_and_entry_point(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--quiet",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("gen_tui-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    # Every module of the three top-level folders, subpackages included: pyproject lists
    # the subpackages by name, and one forgotten there is missing from a real install.
    sources = [
        path.relative_to(ROOT).as_posix()
        for top in ("app", "backends", "widgets")
        for path in (ROOT / top).rglob("*.py")
        if "__pycache__" not in path.parts
    ]
    assert len(sources) > 50
    missing = [module for module in sources if f"gen_tui/{module}" not in names]
    assert not missing, f"not in the wheel (add the package to pyproject.toml): {missing}"
    assert "gen_tui/tui.tcss" in names
    assert not any(name.startswith(("app/", "backends/", "widgets/", "tests/")) for name in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "gen-tui = gen_tui.app.cli.main:main" in text
