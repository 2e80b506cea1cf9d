"""A link another user planted in a shared prompt folder is never followed (attacker's pass 2).

The attack: prompt folders are often shared (a team's datasets, a sticky /tmp-like folder).
A user who may create names there cannot read our files, but a link of theirs, `B.jsonl ->
/root/secret.jsonl`, named a dataset whose prompts were a file only we can read: the run
would have sent its lines to the server as prompts and quoted them in its reasons. A link in
a prompt file's path made by someone other than us or root is refused in one line, by the
rule every prompt reader shares (`watcher.open_named`), and nothing is sent.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from gen_tui.backends import watcher
from gen_tui.backends.engine import Engine, EngineError
from gen_tui.backends.store.prompt_heads import prompt_heads
from tests.support.engine import make_config
from tests.support.users import OTHER_USER, ensure_user, shared_folder

SECRET = "TOP-SECRET-only-root-may-read-this"


@pytest.fixture
def shared_prompts() -> Iterator[Path]:
    """A prompt folder like /tmp: root's, 1777, anyone may create names in it."""
    with shared_folder("gen-tui-prompts-") as folder:
        yield folder


async def test_a_link_another_user_planted_is_refused_and_nothing_is_sent(
    tokenizer_dir: Path,
    sim: Callable[..., Any],
    shared_prompts: Path,
    tmp_path: Path,
) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to act as a second Unix user")
    user = ensure_user(OTHER_USER)
    secret = tmp_path / "secret.jsonl"
    turns = [{"role": "user", "content": SECRET}]
    secret.write_bytes(orjson.dumps({"id": "s1", "messages": turns}) + b"\n")
    secret.chmod(0o600)
    ours = shared_prompts / "A.jsonl"
    ours.write_bytes(orjson.dumps({"id": "a1", "messages": [{"role": "user", "content": "hi"}]}))
    planted = shared_prompts / "B.jsonl"
    subprocess.run(
        ["ln", "-s", str(secret), str(planted)], user=user.pw_uid, group=user.pw_gid, check=True
    )
    said = (
        f"refusing {planted}: {planted} is a link made by uid {user.pw_uid}, not by you "
        "(uid 0), and would have you read a file of their choosing"
    )
    with pytest.raises(watcher.BadFile, match=re.escape(said)):
        os.close(watcher.open_named(str(planted)))
    assert said in (prompt_heads(planted, ["s1"]).missing or "")

    server = await sim()
    config = make_config(tokenizer_dir, shared_prompts, tmp_path / "out", [server.url])
    with pytest.raises(EngineError) as refused:
        await Engine(config).run()
    assert str(refused.value).startswith(f"B: cannot read its prompt file: {said}")
    assert "\n" not in str(refused.value)
    assert server.stats.completed == 0, "a prompt went out"
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path

    # Our own link to the same file is followed as before (prompt caches hold links).
    planted.unlink()
    planted.symlink_to(secret)
    os.close(watcher.open_named(str(planted)))
