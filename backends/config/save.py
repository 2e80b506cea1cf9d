"""Saving a server recipe's edited command into the config file, the rest of it untouched.

Why tomlkit: the servers view's "restart with edited flags" can keep the edit for the next
start; rewriting the file from the parsed values would drop the user's comments, order and
spacing. tomlkit edits the one `argv` in place. The result is read back with the config's
own loader before it replaces the file (a temporary file beside it, then a rename, so a
crash never leaves half a file), and a file that changed on disk since it was read is left
alone: the user's own edit wins, and the line says so.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError

from gen_tui.backends.config.file import ConfigError, load_config
from gen_tui.backends.untrusted import one_line

WRAP_WORDS = 6
"""A longer command is written one word a line (a diff then shows the flag that changed)."""


def _recipe_table(doc: Any, name: str, router: bool) -> Any:
    """The `[[servers]]` table named `name`, or the `[router]` when `router`."""
    if router:
        return doc.get("router")
    for table in doc.get("servers", []):
        if table.get("name") == name:
            return table
    return None


def save_argv(path: Path, name: str, argv: Sequence[str]) -> str:
    """Write `argv` as recipe `name`'s in the config at `path` (a symlink: its target),
    keeping the rest of the file; one line of what was done. ConfigError when it cannot."""
    target = Path(path).resolve()
    current = load_config(target)  # as it is now: which recipe `name` is
    router = current.router is not None and current.router.name == name
    try:
        text = target.read_text(encoding="utf-8")
        doc = tomlkit.parse(text)
    except (OSError, UnicodeDecodeError, TOMLKitError) as exc:
        raise ConfigError(f"{path}: cannot be read to save {name}'s flags: {exc}") from None
    table = _recipe_table(doc, name, router)
    if table is None:
        raise ConfigError(f"{path}: no recipe {name!r} to save its flags in")
    words = tomlkit.array()
    words.extend(list(argv))
    if len(argv) > WRAP_WORDS:
        words.multiline(True)
    table["argv"] = words
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".toml")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(tomlkit.dumps(doc))
        os.chmod(temp, target.stat().st_mode & 0o7777)
        saved = load_config(Path(temp))  # the config's own rules, before it counts
        recipes = [*saved.servers, *([saved.router] if saved.router else [])]
        if not any(r.name == name and r.argv == tuple(argv) for r in recipes):
            raise ConfigError(f"{path}: {name}'s flags did not read back as written")
        if target.read_text(encoding="utf-8") != text:
            raise ConfigError(
                f"{path} changed on disk meanwhile: {name}'s flags not saved (yours kept)"
            )
        os.replace(temp, target)
    except ConfigError as exc:
        raise ConfigError(one_line(str(exc).replace(temp, str(path)), 500)) from None
    except OSError as exc:
        raise ConfigError(f"{path}: {name}'s flags not saved: {exc.strerror or exc}") from None
    finally:
        if os.path.exists(temp):
            os.unlink(temp)
    return f"saved {name}'s command in {path}"
