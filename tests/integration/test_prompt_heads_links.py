"""`v`'s prompt heads read a prompt file by the engine's rule: a link is followed to a
regular file, a FIFO or device is refused at once, in one line.

The gap (issue 16, left open by the last pass): the engine followed links to prompt files
(prompt caches often hold links), while the heads, read by the watcher's `open_regular`,
refused them, so a run's own prompt file showed no heads. Both now open through
`watcher.open_named`: links followed, the target checked regular before the open and on
the open descriptor, the open never waiting. No owner rule on the files: prompt files are
shared and read as the user, by the engine as by the viewer (an owner rule for one alone
would make them disagree again). On links, one rule for both: a link another user made is
refused (tests/integration/test_prompt_links_of_others.py).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable
from pathlib import Path
from typing import TypeVar

import orjson
import pytest

from gen_tui.backends import watcher
from gen_tui.backends.store.prompt_heads import prompt_heads
from gen_tui.backends.store.prompts import NotARegularFile, count_lines
from tests.support.runs import AnyHost

T = TypeVar("T")
TURNS = [{"role": "system", "content": "s"}, {"role": "user", "content": "what is 2+2?"}]


def write_prompts(path: Path) -> None:
    path.write_bytes(
        b"".join(orjson.dumps({"id": f"s{i}", "messages": TURNS}) + b"\n" for i in range(3))
    )


def name_prompt_file(host: AnyHost, dataset: str, prompts: Path) -> None:
    """A dataset folder whose manifest says its last run read `prompts`."""
    folder = Path(host.output_dir) / dataset
    folder.mkdir()
    runs = [{"prompts": str(prompts)}]
    (folder / watcher.MANIFEST_FILE).write_text(json.dumps({"version": 1, "runs": runs}))


async def within(seconds: float, call: Awaitable[T], fifo: Path) -> T:
    """`await call`, failing the test if it waits on `fifo` (its other end is opened so a
    stuck reader ends)."""
    try:
        async with asyncio.timeout(seconds):
            return await call
    except TimeoutError:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("the heads waited on the FIFO")


async def test_a_linked_prompt_file_shows_its_heads(host: AnyHost, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    write_prompts(cache / "blob-0a1b")
    link = tmp_path / "A.jsonl"
    os.symlink(cache / "blob-0a1b", link)
    name_prompt_file(host, "A", link)
    found = await host.prompt_heads("A", ["s0", "s2"])
    assert found.heads == {"s0": "(+1 earlier message) what is 2+2?", "s2": found.heads["s0"]}
    local = prompt_heads(link, ["s1"])  # the viewer's lookup for a run of this machine
    assert local.heads == {"s1": "(+1 earlier message) what is 2+2?"}
    assert count_lines(link) == 3  # and the engine reads it the same way


async def test_a_link_to_a_fifo_is_refused_at_once_in_one_line(
    host: AnyHost, tmp_path: Path
) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "B.jsonl"
    os.symlink(fifo, link)
    name_prompt_file(host, "B", link)
    refused = await within(20, host.prompt_heads("B", ["s0"]), fifo)
    said = f"{link} is a link to a FIFO, not a regular file"
    assert refused.heads == {} and refused.missing == said
    local = await within(5, asyncio.to_thread(prompt_heads, link, ["s0"]), fifo)
    assert local.missing == said
    with pytest.raises(NotARegularFile) as raised:
        await within(5, asyncio.to_thread(count_lines, link), fifo)
    assert str(raised.value) == said


def test_a_link_to_a_folder_or_nowhere_says_so(tmp_path: Path) -> None:
    link = tmp_path / "C.jsonl"
    os.symlink(tmp_path, link)
    assert prompt_heads(link, ["s0"]).missing == f"{link} is a link to a folder, not a regular file"
    link.unlink()
    os.symlink(tmp_path / "gone.jsonl", link)
    assert prompt_heads(link, ["s0"]).missing == f"cannot read {link}: No such file or directory"
