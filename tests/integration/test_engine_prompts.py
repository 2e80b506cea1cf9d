"""Prompts on their way into the engine: a malformed line is counted and named at file:line,
and batched tokenizing gives each prompt its own ids while a prompt the chat template refuses
is named and skipped alone.

The engine in-process against the simulator on loopback, with a real tokenizer."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.engine import make_config, run
from tests.support.records import read_records, recount


async def test_malformed_prompt_lines_are_counted_and_named(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim()
    prompts = prompts_dir(A=10)
    path = prompts / "A.jsonl"
    path.write_bytes(path.read_bytes() + b"{oops\n" + b'{"id": "z"}\n')
    config = make_config(tokenizer_dir, prompts, tmp_path / "out", [server.url])
    final, events, _ = await run(config)
    assert final.datasets[0].malformed == 2
    assert recount(tmp_path / "out" / "A")[1] == 10
    messages = [m for _, m in events]
    assert any(f"{path}:11: not valid JSON" in m for m in messages)
    assert any(f"{path}:12: no 'messages'" in m for m in messages)


async def test_batched_tokenizing_sends_each_prompts_own_ids_and_isolates_a_bad_one(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    """Prompts are tokenized 32 to a call; each must still get its own ids, and a prompt
    the chat template refuses must be named and skipped alone, not sink its batch."""
    from gen_tui.backends.store.prompts import Prompt, iter_prompts
    from gen_tui.backends.tokenizer import encode_messages, load_tokenizer

    picky = tmp_path / "picky-tokenizer"
    shutil.copytree(tokenizer_dir, picky)
    template = picky / "chat_template.jinja"
    template.write_text(
        "{% for m in messages %}{% if m['content'] == 'boom' %}"
        "{{ raise_exception('no boom here') }}{% endif %}{% endfor %}" + template.read_text()
    )
    prompts = prompts_dir(A=70)
    path = prompts / "A.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines.insert(40, b'{"id": "bad", "messages": [{"role": "user", "content": "boom"}]}\n')
    path.write_bytes(b"".join(lines))
    server = await sim()
    config = make_config(picky, prompts, tmp_path / "out", [server.url])
    final, events, _ = await run(config)
    assert final.datasets[0].malformed == 1
    assert any(f"{path}:41: cannot tokenize" in m and "no boom here" in m for _, m in events)
    tokenizer = load_tokenizer(str(picky))
    expected = {
        p.sample_id: len(encode_messages(tokenizer, p.messages))
        for p in iter_prompts(path)
        if isinstance(p, Prompt) and p.sample_id != "bad"
    }
    records = read_records(tmp_path / "out" / "A")
    assert {r["sample_id"]: r["prompt_tokens"] for r in records} == expected
