"""The tests tree itself: every test module sits in a folder by kind, and none imports another.

A test module that imports another (`from .test_runs import host`) ties the two together:
moving, splitting or deleting one breaks the other, and pytest may collect the imported
fixtures or tests twice. Fixtures belong in a conftest.py, helpers in tests/support/ (or a
kind's own support module, as tests/chaos/checker.py).
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support import KINDS

TESTS = Path(__file__).resolve().parents[1]


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, dotted name) of each module `path` imports, relative imports as written."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            found.append((node.lineno, base))
            if not node.module:  # `from . import test_x`
                found += [(node.lineno, base + alias.name) for alias in node.names]
    return found


def cross_imports(tests: Path) -> list[str]:
    """`file:line: imports NAME` for each import of a test module by a test module."""
    return [
        f"{path.relative_to(tests)}:{line}: imports {name}"
        for path in sorted(tests.rglob("test_*.py"))
        for line, name in imported_modules(path)
        if name.rsplit(".", 1)[-1].startswith("test_")
    ]


def misplaced(tests: Path) -> list[str]:
    """Test modules outside the kind folders."""
    return [
        str(path.relative_to(tests))
        for path in sorted(tests.rglob("test_*.py"))
        if path.relative_to(tests).parts[0] not in KINDS
    ]


def test_no_test_module_imports_another() -> None:
    found = cross_imports(TESTS)
    assert not found, "move shared code to tests/support or a conftest.py:\n" + "\n".join(found)


def test_every_test_module_sits_in_a_kind_folder() -> None:
    found = misplaced(TESTS)
    assert not found, f"put these under tests/{{{','.join(KINDS)}}}/: {found}"


def test_the_checks_see_an_import_of_a_test_module(tmp_path: Path) -> None:
    """The checks above would pass on an empty tree: prove they read imports and folders."""
    (tmp_path / "unit").mkdir()
    (tmp_path / "unit" / "test_a.py").write_text(
        "from .test_b import x\nfrom tests.integration.test_c import y\n"
        "from . import test_d\nimport tests.tui.test_e\nfrom tests.support.runs import z\n"
    )
    assert cross_imports(tmp_path) == [
        "unit/test_a.py:1: imports .test_b",
        "unit/test_a.py:2: imports tests.integration.test_c",
        "unit/test_a.py:3: imports .test_d",
        "unit/test_a.py:4: imports tests.tui.test_e",
    ]
    (tmp_path / "test_stray.py").write_text("")
    assert misplaced(tmp_path) == ["test_stray.py"]
