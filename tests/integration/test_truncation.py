"""Answers cut at max_new_tokens: the cap comes from the server, and a run says when it cuts.

Runs against the simulator (both APIs) with a real tokenizer; the simulator records the
`max_new_tokens` each request asked for, and answers `/get_server_info` and `/v1/models`
with its context length as SGLang and vLLM do.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.clients.models import limits_from_models
from gen_tui.backends.config.run import DatasetSpec, EngineConfig
from gen_tui.backends.engine import Engine
from gen_tui.backends.engine.answer_cap import AnswerCap, prompt_bound
from gen_tui.backends.hosts import LocalHost
from gen_tui.backends.hosts.monitor import HostMonitor
from gen_tui.backends.progress.snapshot import RunSnapshot
from gen_tui.backends.progress.truncation import TruncationWatch, label, over
from gen_tui.backends.settings import DEFAULT_MAX_NEW_TOKENS, MAX_NEW_TOKENS_CAP
from gen_tui.backends.sim import LengthProfile, SimConfig
from gen_tui.backends.store.progress_file import ProgressFile
from gen_tui.backends.tokenizer import load_tokenizer
from gen_tui.widgets.dataset_panel import truncation_piece
from tests.support.engine import with_hooks
from tests.support.polling import wait_until
from tests.support.records import progress, read_records
from tests.support.runs import finish, run_args, spawn
from tests.support.tui import SIZE, SimSource, panel

CONTEXT = 600
"""A small context, so that long answers (mean 3,000) are cut by it."""


def config_for(
    prompts: Path, output: Path, url: str, tokenizer: str, **overrides: Any
) -> EngineConfig:
    options: dict[str, Any] = {
        "datasets": [DatasetSpec(p.stem, p) for p in sorted(prompts.glob("*.jsonl"))],
        "server_urls": [url],
        "tokenizer": tokenizer,
        "output_dir": output,
        "concurrency": 16,
        "snapshot_interval_s": 0.05,
        "progress_interval_s": 0.1,
        "seed": 1,
    }
    options.update(overrides)
    return EngineConfig(**with_hooks(options))


async def run(config: EngineConfig) -> tuple[RunSnapshot, list[tuple[str, str]]]:
    events: list[tuple[str, str]] = []
    final = await Engine(config, on_event=lambda *e: events.append(e)).run()
    return final, events


def cut_warnings(events: list[tuple[str, str]]) -> list[str]:
    return [text for level, text in events if level == "warning" and "cut at max_new" in text]


# the rule, alone


def test_the_cap_follows_the_user_then_the_server_then_the_default() -> None:
    assert AnswerCap().run_cap == DEFAULT_MAX_NEW_TOKENS
    assert AnswerCap().for_prompt(10**6) == DEFAULT_MAX_NEW_TOKENS  # no context: no bound
    big = AnswerCap(context_length=131072)
    assert big.run_cap == MAX_NEW_TOKENS_CAP
    assert big.for_prompt(120000) == 131072 - 120000 - 1
    small = AnswerCap(context_length=4096)
    assert small.for_prompt(1000) == 3095
    assert AnswerCap(given=100, context_length=4096).for_prompt(1000) == 100
    assert AnswerCap(given=100000, context_length=4096).for_prompt(1000) == 3095
    assert AnswerCap(given=100000).for_prompt(1000) == 100000
    routed = AnswerCap(context_length=200000, max_completion_tokens=8192)
    assert routed.for_prompt(50) == 8192
    assert AnswerCap(context_length=100).for_prompt(500) == 1  # refused by the server, named
    assert "does not say" in AnswerCap().describe()
    assert "context 4,096" in small.describe()


def test_the_prompt_bound_is_never_below_the_tokenizers_count(tokenizer_dir: Path) -> None:
    tokenizer = load_tokenizer(str(tokenizer_dir))
    for messages in (
        [{"role": "user", "content": "hi"}],
        [{"role": "system", "content": "be brief"}, {"role": "user", "content": "é" * 300}],
        [{"role": "user", "content": "def f(x):\n    return x ** 2  # 日本語 " * 40}],
    ):
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        assert len(ids) <= prompt_bound(messages)


@pytest.mark.parametrize(
    ("payload", "model", "context", "completion"),
    [
        ({"data": [{"id": "m", "max_model_len": 4096}]}, None, 4096, None),  # vLLM, SGLang
        ({"data": [{"id": "m", "max_model_len": 4096}]}, "other", 4096, None),  # one served
        (
            {
                "data": [
                    {"id": "a/x", "context_length": 8000},
                    {
                        "id": "b/y",
                        "context_length": 262144,
                        "top_provider": {"max_completion_tokens": 65536},
                    },
                ]
            },
            "b/y",
            262144,
            65536,
        ),  # OpenRouter
        ({"data": [{"id": "a", "context_length": 1}, {"id": "b"}]}, "c", None, None),
        ({"data": [{"id": "m", "max_model_len": True}]}, None, None, None),
        ({"data": [{"id": "m", "max_model_len": -5}]}, None, None, None),
        ({"data": "nope"}, None, None, None),
        ([1, 2], None, None, None),
    ],
)
def test_model_limits_are_read_where_each_server_puts_them(
    payload: Any, model: str | None, context: int | None, completion: int | None
) -> None:
    limits = limits_from_models(payload, model)
    assert (limits.context_length, limits.max_completion_tokens) == (context, completion)


def test_the_share_is_judged_after_enough_answers_and_warned_again_when_it_doubles() -> None:
    watch = TruncationWatch()
    for _ in range(3):
        watch.observe("length")
    assert not over(3, 3, 5.0)  # 3 of 3: too few answers to judge
    assert watch.warning("A", 3, 5.0, 4096) is None
    assert watch.warning("A", 20, 5.0, 4096) is not None  # 15%
    assert watch.warning("A", 25, 5.0, 4096) is None  # 12%: said already
    for _ in range(7):
        watch.observe("length")
    message = watch.warning("A", 30, 5.0, 4096)  # 33%: more than doubled
    assert message is not None and "33%" in message and "10 of 30" in message
    watch.observe("stop")
    assert watch.truncated == 10
    assert label(0, 10) == "" and label(1, 200) == "0.5% cut" and label(3, 10) == "30% cut"


def test_progress_file_keeps_a_sane_share_only() -> None:
    good = ProgressFile.parse({"truncated": 3, "truncated_of": 10, "truncated_warn": 5})
    assert good is not None and (good.truncated, good.truncated_of) == (3, 10)
    assert good.truncated_warn == 5.0
    for bad in ({"truncated": 11, "truncated_of": 10}, {"truncated": -1, "truncated_of": 10}):
        parsed = ProgressFile.parse(bad)
        assert parsed is not None and parsed.truncated is None and "truncated" in parsed.ignored
    old = ProgressFile.parse({"state": "active"})  # a file from before the count
    assert old is not None and old.truncated is None


# runs over the simulator


async def test_the_default_cap_is_the_context_left_and_the_cut_share_is_warned(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim(context_length=CONTEXT, profiles={"A": LengthProfile(mean=3000)})
    out = tmp_path / "out"
    config = config_for(prompts_dir(A=60), out, server.url, str(tokenizer_dir))
    final, events = await run(config)

    assert any("context 600" in text for level, text in events if level == "info")
    records = read_records(out / "A")
    assert len(records) == 60 and server.stats.rejected == 0
    asked = server.stats.max_new_tokens
    for record in records:
        rid = next(r for r in asked if r.startswith(f"A/{record['sample_id']}/"))
        assert asked[rid] == CONTEXT - record["prompt_tokens"] - 1
    cut = sum(record["finish_reason"] == "length" for record in records)
    assert cut >= 50  # mean 3,000 against about 570 tokens of room

    warnings = cut_warnings(events)
    assert warnings and warnings[0].startswith("A: ")
    snap = final.datasets[0]
    assert (snap.truncated, snap.truncated_of) == (cut, 60)
    written = progress(out / "A")
    assert (written["truncated"], written["truncated_of"]) == (cut, 60)
    read = ProgressFile.read(out / "A" / "progress.json")
    assert read is not None and read.truncated == cut


async def test_a_watched_run_shows_the_writers_cut_share(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    """Seen from another process (the host monitor reads the folder, as over SSH), the
    dataset carries the share its writer counted, highlighted as on the writer's panel."""
    server = await sim(context_length=CONTEXT, profiles={"A": LengthProfile(mean=3000)})
    out = tmp_path / "out"
    final, _ = await run(config_for(prompts_dir(A=40), out, server.url, str(tokenizer_dir)))
    monitor = HostMonitor(LocalHost(out), survey_s=0.3)
    task = asyncio.create_task(monitor.run())
    try:
        deadline = time.monotonic() + 30
        while (watched := monitor.snapshot("A")) is None or watched.samples < 40:
            assert time.monotonic() < deadline, "A never watched"
            await asyncio.sleep(0.05)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert (watched.truncated, watched.truncated_of) == (final.datasets[0].truncated, 40)
    piece = truncation_piece(watched)
    assert piece is not None and piece[1] == ("truncated-over",)


async def test_a_users_cap_holds_but_never_past_the_context(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim(context_length=CONTEXT, profiles={"A": LengthProfile(mean=50, cv=0.1)})
    out = tmp_path / "out"
    prompts = prompts_dir(A=30)
    config = config_for(
        prompts, out, server.url, str(tokenizer_dir), sampling={"max_new_tokens": 10**6}
    )
    _, events = await run(config)
    records = read_records(out / "A")
    assert len(records) == 30 and server.stats.rejected == 0
    assert all(
        value < CONTEXT and value >= CONTEXT - 200 for value in server.stats.max_new_tokens.values()
    )
    assert not cut_warnings(events)  # short answers: nothing cut, nothing said

    small = await sim(context_length=CONTEXT, profiles={"A": LengthProfile(mean=50, cv=0.1)})
    config = config_for(
        prompts, tmp_path / "out2", small.url, str(tokenizer_dir), sampling={"max_new_tokens": 40}
    )
    await run(config)
    assert set(small.stats.max_new_tokens.values()) == {40}


async def test_an_openai_run_without_a_tokenizer_stays_inside_the_context(
    prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim(context_length=CONTEXT, profiles={"A": LengthProfile(mean=3000)})
    out = tmp_path / "out"
    config = config_for(
        prompts_dir(A=30), out, server.url, "", api="openai", sim_dataset_header=True
    )
    final, events = await run(config)
    records = read_records(out / "A")
    assert len(records) == 30 and server.stats.rejected == 0
    for value in server.stats.max_new_tokens.values():
        assert value is not None and 0 < value < CONTEXT
    assert final.datasets[0].truncated == sum(r["finish_reason"] == "length" for r in records)
    assert cut_warnings(events)


async def test_gen_tui_run_logs_the_cut_share_and_honours_its_threshold(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    """A real `gen-tui run`: answers cut at a 64-token cap are said in its plain log; with
    the threshold above the share, nothing is said."""
    server = await sim(profiles={"A": LengthProfile(mean=100, cv=0.5)})
    prompts = prompts_dir(A=60)
    args = run_args(tokenizer_dir, prompts, tmp_path / "out", server.url, "--max-new-tokens", "64")
    code, stdout, stderr = await finish(await spawn(*args))
    assert code == 0, stderr
    cut = sum(r["finish_reason"] == "length" for r in read_records(tmp_path / "out" / "A"))
    assert cut > 6  # most of them: mean 100 against 64
    line = next(line for line in stdout.splitlines() if "cut at max_new_tokens (64)" in line)
    assert "warning" in line and "past the 5% warning" in line

    args = run_args(tokenizer_dir, prompts, tmp_path / "out2", server.url, "--max-new-tokens", "64")
    code, stdout, stderr = await finish(await spawn(*args, "--warn-truncated", "100"))
    assert code == 0, stderr
    assert "cut at max_new_tokens" not in stdout


# the panel


async def test_the_panel_highlights_a_cut_share_past_the_warning(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], tmp_path: Path, vocab_size: int
) -> None:
    folder = prompts_dir(A=60)
    config = EngineConfig(
        datasets=[DatasetSpec("A", folder / "A.jsonl")],
        server_urls=[],
        tokenizer=str(tokenizer_dir),
        output_dir=tmp_path / "out",
        concurrency=16,
    )
    sim_config = SimConfig(
        slots=16,
        tokens_per_s=1e6,
        vocab_size=vocab_size,
        context_length=CONTEXT,
        default_profile=LengthProfile(mean=3000),
    )
    app = GenTuiApp(SimSource(config, sim_config), autostart=True)
    async with app.run_test(size=SIZE) as pilot:

        def highlighted() -> str | None:
            for line in panel(app, "A").lines():
                for text, names in line:
                    if "truncated-over" in names:
                        return text
            return None

        text = await wait_until(highlighted, 60, "the cut share highlighted", pause=pilot.pause)
        assert text.strip().endswith("% cut")
        assert int(text.strip().split("%")[0]) >= 50
        await wait_until(
            lambda: any("cut at max_new_tokens" in t for _, t in app.events),
            30,
            "the warning in the app's log",
            pause=pilot.pause,
        )
        assert any(level == "warning" and "A: " in t for level, t in app.events)
