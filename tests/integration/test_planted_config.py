"""Issue 30, point 7: a `gen-tui.toml` planted in a shared folder is refused, not obeyed.

A real second Unix user writes `gen-tui.toml` in a 1777 folder, naming their own alert
endpoint; root (us) `cd`s there and runs `gen-tui alert --test` and a bare `gen-tui`, real
processes. Before, the alert reached their endpoint. Now each refuses in one line naming
the file's owner and mode, and nothing is sent; a config of ours that its group may write
is refused the same way, and one of ours that nobody else may write still works.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from tests.support.run_output import ENV, GEN_TUI
from tests.support.users import OTHER_USER, ensure_user, give, shared_folder


async def gen_tui_in(folder: Path, *args: str) -> tuple[int, str, str]:
    """`gen-tui ARGS` run in `folder` (as `cd folder; gen-tui ...`), no terminal."""
    process = await asyncio.create_subprocess_exec(
        *GEN_TUI,
        *args,
        cwd=folder,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**ENV, "XDG_CONFIG_HOME": str(folder / "no-user-config")},
        start_new_session=True,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), 30)
    except TimeoutError:
        process.kill()
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def plant(folder: Path, url: str, mode: int = 0o644) -> Path:
    config = folder / "gen-tui.toml"
    config.write_text(f'[alerts]\nurls = ["{url}"]\n')
    config.chmod(mode)
    return config


async def test_another_users_config_in_a_shared_folder_is_refused(hook: Any) -> None:
    user = ensure_user(OTHER_USER)
    url, received = hook
    with shared_folder("gen-tui-planted-") as folder:
        config = give(plant(folder, url), user)
        for args in (("alert", "--test"), ()):
            code, _, stderr = await gen_tui_in(folder, *args)
            lines = stderr.splitlines()
            assert code == 2 and len(lines) == 1, (args, stderr)
            assert lines[0] == (
                f"gen-tui: error: refusing config {config}: it belongs to {OTHER_USER} "
                f"(uid {user.pw_uid}), not to you (uid 0) or root (mode 0644); a config must "
                "be yours or root's and writable by nobody else"
            ), lines[0]
        code, _, stderr = await gen_tui_in(folder, "alert", "--test", "--config", str(config))
        assert code == 2 and "refusing config" in stderr, stderr
        assert received == [], "their endpoint received our alert"

        # Ours, but its group may write it: refused the same way.
        os.chown(config, 0, 0)
        config.chmod(0o664)
        code, _, stderr = await gen_tui_in(folder, "alert", "--test")
        assert code == 2 and "its group may write it (mode 0664, owner root (uid 0))" in stderr
        assert received == []

        # Ours, and nobody else may write it: obeyed.
        config.chmod(0o644)
        code, stdout, stderr = await gen_tui_in(folder, "alert", "--test")
        assert code == 0 and "sent a test alert to 1 URL(s)" in stdout, stderr
        assert len(received) == 1
