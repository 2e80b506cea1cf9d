"""The watcher is a package but ships as one text (`watcher.source()`): that text must be one
valid Python 3.8 program. Its modules' imports of one another are dropped when it is built,
so it only works if every top-level name is defined once, in `MODULES` order, and nothing
of ours is imported (on a GPU box no package of ours is installed)."""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

from gen_tui.backends import watcher

PACKAGE = Path(watcher.__file__).parent


def top_level_bindings(tree: ast.Module) -> dict[str, list[str]]:
    """{name: [how each top-level statement binds it]}: `def`, `class`, an assignment, or
    `import X` (`import a.b` and `import a.c` both bind `a`, to the same module)."""
    found: dict[str, list[str]] = defaultdict(list)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found[node.name].append(f"line {node.lineno}: def/class")
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        found[name.id].append(f"line {node.lineno}: assignment")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                origin = alias.name.split(".")[0] if isinstance(node, ast.Import) else None
                found[bound].append(f"import {origin}" if origin else f"line {node.lineno}")
    return found


def defined_twice(text: str) -> dict[str, list[str]]:
    """The top-level names `text` binds more than once (the same `import a.x` root aside)."""
    twice = {}
    for name, bindings in top_level_bindings(ast.parse(text)).items():
        if len(bindings) > 1 and not (len(set(bindings)) == 1 and bindings[0].startswith("import")):
            twice[name] = bindings
    return twice


def own_imports(text: str) -> list[str]:
    """Imports of this project's code in `text`: relative ones or of gen_tui (anywhere)."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and (
            node.level > 0 or (node.module or "").startswith("gen_tui")
        ):
            found.append(f"line {node.lineno}: from {'.' * node.level}{node.module or ''}")
        elif isinstance(node, ast.Import):
            found += [
                f"line {node.lineno}: import {alias.name}"
                for alias in node.names
                if alias.name.startswith("gen_tui")
            ]
    return found


def test_the_built_program_compiles_as_python38() -> None:
    text = watcher.source()
    ast.parse(text, feature_version=(3, 8))
    compile(text, "<watcher>", "exec")
    assert text.count("from __future__ import annotations") == 1
    assert text.rstrip().endswith('if __name__ == "__main__":\n    sys.exit(main())')


def test_the_built_program_defines_no_top_level_name_twice() -> None:
    twice = defined_twice(watcher.source())
    assert not twice, f"rename one of each (the modules share one namespace): {twice}"


def test_the_built_program_imports_nothing_of_ours_and_stdlib_only() -> None:
    text = watcher.source()
    assert own_imports(text) == []
    roots = {
        alias.name.split(".")[0] if isinstance(node, ast.Import) else node.module.split(".")[0]
        for node in ast.walk(ast.parse(text))
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    assert roots <= set(sys.stdlib_module_names) | {"__future__"}, roots


def test_every_module_of_the_package_is_in_the_program_in_dependency_order() -> None:
    """A module left out of MODULES would be missing on the GPU box; one listed after a
    module that imports it would leave a name undefined when that one's top level runs."""
    files = {path.stem for path in PACKAGE.glob("*.py")} - {"__init__", "__main__"}
    assert set(watcher.MODULES) == files
    for position, name in enumerate(watcher.MODULES):
        tree = ast.parse((PACKAGE / f"{name}.py").read_text(), name)
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                assert node.module in watcher.MODULES[:position], (
                    f"{name}.py imports .{node.module}, which MODULES puts after it"
                )
        assert f"# -- watcher/{name}.py " in watcher.source()


def test_the_built_program_is_the_modules_statements_unchanged_in_order() -> None:
    """Building only drops imports: every other statement of every module (docstrings
    included) reaches the program as it is, in MODULES order."""

    def statements(text: str) -> list[str]:
        return [
            ast.dump(node)
            for node in ast.parse(text).body
            if not isinstance(node, (ast.Import, ast.ImportFrom))
        ]

    expected = [
        statement
        for name in watcher.MODULES
        for statement in statements((PACKAGE / f"{name}.py").read_text())
    ]
    assert statements(watcher.source())[1:] == expected  # [0]: the program's docstring


def test_every_name_the_package_exports_is_defined_by_the_program() -> None:
    """`from gen_tui.backends import watcher` and the text sent to a box are one program:
    each public name of the package is a top-level name of the text."""
    defined = top_level_bindings(ast.parse(watcher.source()))
    missing = [name for name in watcher.__all__ if name not in defined and name != "source"]
    assert not missing


def test_the_checks_see_a_name_defined_twice_and_an_import_of_ours() -> None:
    """The checks above would pass on any text if they read nothing: prove they do."""
    text = (
        "import os\nimport urllib.error\nimport urllib.request\nimport os\n"
        "X = 1\ndef f(): pass\nclass X: pass\nfrom .files import BadFile\n"
        "def g():\n    from gen_tui.backends import records\n"
    )
    assert set(defined_twice(text)) == {"X"}
    assert own_imports(text) == [
        "line 8: from .files",
        "line 10: from gen_tui.backends",
    ]
