"""--max-prompt-tokens: a prompt over it is a prompt problem (counted, reported, never sent).

Measured with the real tokenizer the tests build, through a whole run against the
simulator, for both APIs: the OpenAI client takes messages, yet with a tokenizer its
prompts are counted all the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from gen_tui.backends.config.run import EngineConfig, EngineError
from gen_tui.backends.settings import DEFAULT_MAX_PROMPT_TOKENS
from gen_tui.backends.store.prompts import Prompt, iter_prompts
from gen_tui.backends.tokenizer import encode_messages, load_tokenizer
from tests.support.engine import make_config, run
from tests.support.records import read_records

CAP = 200


@pytest.mark.parametrize("api", ["sglang", "openai"])
async def test_a_prompt_over_the_token_cap_is_reported_and_never_sent(
    api: str, tokenizer_dir: Path, sim: Any, tmp_path: Path
) -> None:
    path = tmp_path / "prompts" / "A.jsonl"
    path.parent.mkdir()
    lines = [{"id": f"s{i}", "prompt": f"short prompt {i}"} for i in range(5)]
    lines.insert(2, {"id": "long", "prompt": "many words here " * 400})
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    tokenizer = load_tokenizer(str(tokenizer_dir))
    sizes = {
        p.sample_id: len(encode_messages(tokenizer, p.messages))
        for p in iter_prompts(path)
        if isinstance(p, Prompt)
    }
    assert sizes["long"] > CAP >= max(n for sid, n in sizes.items() if sid != "long")
    server = await sim()
    config = make_config(
        tokenizer_dir,
        path.parent,
        tmp_path / "out",
        [server.url],
        api=api,
        model="m",
        max_prompt_tokens=CAP,
    )
    final, events, _ = await run(config)
    expected = f"{path}:3: prompt is {sizes['long']:,} tokens, over the {CAP:,} allowed"
    assert any(f"{expected} (--max-prompt-tokens)" in message for _, message in events)
    assert final.datasets[0].malformed == 1
    assert sorted(r["sample_id"] for r in read_records(tmp_path / "out" / "A")) == [
        f"s{i}" for i in range(5)
    ]
    assert server.stats.requests == 5, "the long prompt was sent"


def test_the_cap_is_a_setting_with_a_checked_default() -> None:
    assert EngineConfig([]).max_prompt_tokens == DEFAULT_MAX_PROMPT_TOKENS == 32768
    with pytest.raises(EngineError, match="--max-prompt-tokens"):
        EngineConfig([], max_prompt_tokens=0)


def test_the_new_flags_reach_the_engine(tmp_path: Path) -> None:
    from gen_tui.app.cli.main import engine_config
    from gen_tui.app.cli.parser import build_parser

    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "A.jsonl").write_text('{"prompt": "hi"}\n')
    tok = tmp_path / "tok"  # checked to be a folder before any server is asked (issue 31.16)
    tok.mkdir()
    args = build_parser().parse_args(
        [
            "run",
            *("--prompts-dir", str(tmp_path / "prompts"), "--tokenizer", str(tok)),
            *("--max-prompt-tokens", "64k", "--idle-timeout", "30"),
        ]
    )
    config = engine_config(args)
    assert (config.max_prompt_tokens, config.idle_timeout_s) == (64_000, 30.0)
    defaults = engine_config(
        build_parser().parse_args(
            ["run", "--prompts-dir", str(tmp_path / "prompts"), "--tokenizer", str(tok)]
        )
    )
    assert (defaults.max_prompt_tokens, defaults.idle_timeout_s) == (32768, 120.0)
