"""The engine against the simulator's OpenAI-compatible endpoint: streams, limits, cost, keys."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from gen_tui.backends.clients.wire import retry_delay
from gen_tui.backends.config.run import EngineError
from gen_tui.backends.progress.snapshot import DatasetState
from gen_tui.backends.sim import Faults, LengthProfile
from tests.support.engine import make_config, run
from tests.support.records import read_records
from tests.support.runs import ENV, finish, run_args, spawn
from tests.support.sim_http import reconfigure

KEY = "sk-test-0123456789abcdef"


@pytest.fixture
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("GEN_TUI_TEST_KEY", KEY)
    return "GEN_TUI_TEST_KEY"


def openai_config(tokenizer_dir: Path, prompts: Path, out: Path, url: str, **extra: Any) -> Any:
    options: dict[str, Any] = {
        "api": "openai",
        "model": "sim-model",
        "api_key_env": "GEN_TUI_TEST_KEY",
        "sim_dataset_header": True,  # the simulator's length profiles go by dataset
    }
    options.update(extra)
    return make_config(tokenizer_dir, prompts, out, [url], **options)


def assert_no_secret(folder: Path, events: list[tuple[str, str]]) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), f"API key written to {path}"
    assert not any(KEY in message for _, message in events)


@pytest.mark.parametrize(
    ("stream", "ending"),
    [
        (False, "done"),
        (True, "done"),
        (True, "none"),
        (True, "usage_with_choices"),
        (True, "usage_no_choices"),
    ],
)
async def test_every_stream_ending_gives_complete_records(
    stream: bool,
    ending: str,
    api_key: str,
    tokenizer_dir: Path,
    prompts_dir: Callable[..., Path],
    sim: Any,
    tmp_path: Path,
) -> None:
    server = await sim(
        api_key=KEY,
        openai_stream_end=ending,
        cost_per_million=(1.0, 2.0),
        profiles={"A": LengthProfile(mean=80)},
    )
    config = openai_config(
        tokenizer_dir, prompts_dir(A=15), tmp_path / "out", server.url, stream=stream
    )
    final, events, _ = await run(config)
    records = read_records(tmp_path / "out" / "A")
    assert len(records) == 15 and final.datasets[0].state is DatasetState.EXHAUSTED
    for record in records:
        assert record["completion_tokens"] > 0 and record["text"]
        assert record["output_ids"], "no ids from the local tokenizer"
        assert record["cost"] == pytest.approx(
            (record["prompt_tokens"] * 1.0 + record["completion_tokens"] * 2.0) / 1e6
        )
    assert final.datasets[0].tokens == sum(r["completion_tokens"] for r in records)
    assert final.datasets[0].cost == pytest.approx(sum(r["cost"] for r in records))
    assert_no_secret(tmp_path / "out", events)


async def test_mid_stream_errors_and_faults_are_retried_never_recorded(
    api_key: str,
    tokenizer_dir: Path,
    prompts_dir: Callable[..., Path],
    sim: Any,
    tmp_path: Path,
) -> None:
    faults = Faults(
        stream_error=0.3, error_5xx=0.1, torn_json=0.1, rate_429=0.1, retry_after_s=0.05
    )
    server = await sim(api_key=KEY, faults=faults)
    config = openai_config(
        tokenizer_dir, prompts_dir(A=40), tmp_path / "out", server.url, stream=True, max_retries=30
    )
    final, _, _ = await run(config)
    records = read_records(tmp_path / "out" / "A")
    assert len(records) == 40 == len({r["sample_id"] for r in records})
    assert server.stats.faults["stream_error"] > 0
    assert final.datasets[0].errors == 0


async def test_rate_limits_cut_concurrency_and_recover(
    api_key: str,
    tokenizer_dir: Path,
    prompts_dir: Callable[..., Path],
    sim: Any,
    tmp_path: Path,
) -> None:
    server = await sim(
        api_key=KEY, faults=Faults(rate_429=0.5, retry_after_s=0.05), tokens_per_s=2000
    )
    config = openai_config(
        tokenizer_dir,
        prompts_dir(A=60),
        tmp_path / "out",
        server.url,
        max_retries=50,
        concurrency=16,
    )
    _, events, snapshots = await run(config)
    assert len(read_records(tmp_path / "out" / "A")) == 60
    limits = [s.concurrency_limit for s in snapshots if s.concurrency_limit is not None]
    assert min(limits) < 16
    assert any("concurrency cut" in message for _, message in events)


async def test_payment_required_pauses_instead_of_burning_retries(
    api_key: str,
    tokenizer_dir: Path,
    prompts_dir: Callable[..., Path],
    sim: Any,
    tmp_path: Path,
) -> None:
    import asyncio

    from gen_tui.backends.engine import Engine

    server = await sim(api_key=KEY, faults=Faults(payment_402=1.0))
    config = openai_config(
        tokenizer_dir,
        prompts_dir(A=10),
        tmp_path / "out",
        server.url,
        credit_probe_s=0.5,
        max_retries=1,
    )
    events: list[tuple[str, str]] = []
    engine = Engine(config, on_event=lambda *e: events.append(e))
    task = asyncio.create_task(engine.run())
    for _ in range(100):
        if any("out of credits" in m for _, m in events):
            break
        await asyncio.sleep(0.05)
    assert any("dispatch paused" in m for _, m in events)
    await reconfigure(server, {"faults": {"payment_402": 0.0}})
    final = await asyncio.wait_for(task, 30)
    assert final.datasets[0].errors == 0
    assert len(read_records(tmp_path / "out" / "A")) == 10


async def test_a_refused_key_stops_at_once_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
    tokenizer_dir: Path,
    prompts_dir: Callable[..., Path],
    sim: Any,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("GEN_TUI_TEST_KEY", "sk-wrong")
    server = await sim(api_key=KEY)
    config = openai_config(
        tokenizer_dir, prompts_dir(A=200), tmp_path / "out", server.url, concurrency=4
    )
    with pytest.raises(EngineError, match="set GEN_TUI_TEST_KEY to a valid API key"):
        await run(config)
    assert server.stats.requests <= 8
    assert "sk-wrong" not in (tmp_path / "out" / "A" / "progress.json").read_text()


async def test_a_wrong_model_stops_the_run_instead_of_failing_every_sample(
    api_key: str,
    tokenizer_dir: Path,
    prompts_dir: Callable[..., Path],
    sim: Any,
    tmp_path: Path,
) -> None:
    server = await sim(api_key=KEY, model_name="the-real-model", strict_model=True)
    config = openai_config(
        tokenizer_dir, prompts_dir(A=300), tmp_path / "out", server.url, concurrency=4
    )
    with pytest.raises(EngineError, match=r"refused 20 requests in a row .*check --model"):
        await run(config)
    errors = (tmp_path / "out" / "A" / "errors.jsonl").read_text().splitlines()
    assert 20 <= len(errors) < 40, "the run went on refusing sample after sample"
    assert server.stats.requests < 40
    assert not read_records(tmp_path / "out" / "A")


async def test_max_cost_stops_dispatching(
    api_key: str,
    tokenizer_dir: Path,
    prompts_dir: Callable[..., Path],
    sim: Any,
    tmp_path: Path,
) -> None:
    server = await sim(
        api_key=KEY, cost_per_million=(0.0, 100.0), profiles={"A": LengthProfile(mean=200)}
    )
    config = openai_config(
        tokenizer_dir, prompts_dir(A=500), tmp_path / "out", server.url, max_cost=1.0, concurrency=8
    )
    final, events, _ = await run(config)
    records = read_records(tmp_path / "out" / "A")
    spent = sum(r["cost"] for r in records)
    assert 0.9 < spent < 1.2
    assert len(records) < 500
    assert final.datasets[0].state is DatasetState.DONE
    assert any("cost budget reached" in m for _, m in events)


def test_rate_limit_reset_headers() -> None:
    assert retry_delay({"Retry-After": "0.5"}) == 0.5
    now = 1_800_000_000.0
    assert retry_delay({"X-RateLimit-Reset": str(int((now + 7) * 1000))}, now=now) == 7.0
    assert retry_delay({"X-RateLimit-Reset": str(int(now + 10))}, now=now) == 10.0
    assert retry_delay({}) is None


@pytest.mark.quick
async def test_gen_tui_run_with_the_openai_api(
    monkeypatch: pytest.MonkeyPatch,
    tokenizer_dir: Path,
    prompts_dir: Callable[..., Path],
    sim: Any,
    tmp_path: Path,
) -> None:
    server = await sim(api_key=KEY, cost_per_million=(1.0, 1.0))
    out = tmp_path / "out"
    args = run_args(
        tokenizer_dir,
        prompts_dir(A=10),
        out,
        server.url,
        "--api",
        "openai",
        "--model",
        "sim-model",
        "--api-key-env",
        "GEN_TUI_TEST_KEY",
    )
    monkeypatch.setitem(ENV, "GEN_TUI_TEST_KEY", KEY)
    code, stdout, stderr = await finish(await spawn(*args))
    assert code == 0, stderr
    assert KEY not in stdout + stderr
    assert len(read_records(out / "A")) == 10
    progress = orjson.loads((out / "A" / "progress.json").read_bytes())
    assert progress["cost"] > 0
