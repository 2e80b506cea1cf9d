"""The engine in-process against the simulator on loopback, with a real tokenizer."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from gen_tui.backends.budget import BudgetMode
from gen_tui.backends.engine import Engine
from gen_tui.backends.lock import DatasetLock
from gen_tui.backends.run_config import EngineError
from gen_tui.backends.sim import Faults, LengthProfile
from gen_tui.backends.snapshot import DatasetState
from tests.support.engine import make_config, run
from tests.support.records import progress, read_records, record_lines, recount


async def test_runs_all_prompts_and_writes_records(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim()
    config = make_config(tokenizer_dir, prompts_dir(A=40, B=25), tmp_path / "out", [server.url])
    final, _, snapshots = await run(config)
    assert [d.state for d in final.datasets] == [DatasetState.EXHAUSTED] * 2
    for name, expected in (("A", 40), ("B", 25)):
        tokens, records = recount(tmp_path / "out" / name)
        assert records == expected
        snap = progress(tmp_path / "out" / name)
        assert (snap["tokens"], snap["samples"], snap["state"]) == (tokens, records, "exhausted")
        first = read_records(tmp_path / "out" / name)[0]
        assert {
            "sample_id",
            "output_ids",
            "prompt_tokens",
            "completion_tokens",
            "finish_reason",
        } <= set(first)
    assert server.stats.completed == 65
    assert snapshots, "the engine published no snapshots"


# Precise may end short of its budget by design: tests/integration/test_precise_mode.py.
@pytest.mark.parametrize("mode", [mode for mode in BudgetMode if mode is not BudgetMode.PRECISE])
async def test_budget_modes(
    mode: BudgetMode,
    tokenizer_dir: Path,
    prompts_dir: Callable[..., Path],
    sim: Any,
    tmp_path: Path,
) -> None:
    server = await sim(profiles={"A": LengthProfile(mean=400)}, tokens_per_s=20000, slots=64)
    budget = 200_000
    config = make_config(
        tokenizer_dir,
        prompts_dir(A=1500),
        tmp_path / "out",
        [server.url],
        budgets={"A": (budget, None)},
        budget_mode=mode,
        concurrency=48,
        sampling={"max_new_tokens": 1500},
    )
    final, events, _ = await run(config)
    tokens, _ = recount(tmp_path / "out" / "A")
    assert final.datasets[0].tokens == tokens
    assert progress(tmp_path / "out" / "A")["tokens"] == tokens
    assert final.datasets[0].state is DatasetState.DONE
    if mode is BudgetMode.STRICT:
        assert budget - 1500 < tokens <= budget
    else:
        assert tokens >= budget
    if mode is BudgetMode.PREDICTIVE:
        assert tokens - budget < budget * 0.02, f"predictive overshot by {tokens - budget}"
    assert any("budget reached" in message for _, message in events)
    assert any(level == "budget-event" and ": done at" in m for level, m in events)
    crossed = any(level == "budget-event" and ": crossed at" in m for level, m in events)
    assert crossed == (mode is not BudgetMode.STRICT)  # strict never reaches the budget


async def test_drain_overshoots_more_than_predictive(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim(profiles={"A": LengthProfile(mean=400)}, tokens_per_s=20000, slots=64)
    prompts = prompts_dir(A=600)
    overshoot = {}
    for mode in (BudgetMode.DRAIN, BudgetMode.PREDICTIVE):
        config = make_config(
            tokenizer_dir,
            prompts,
            tmp_path / mode.value,
            [server.url],
            budgets={"A": (20_000, None)},
            budget_mode=mode,
            concurrency=48,
        )
        await run(config)
        overshoot[mode] = recount(tmp_path / mode.value / "A")[0] - 20_000
    assert overshoot[BudgetMode.DRAIN] > overshoot[BudgetMode.PREDICTIVE]


async def test_max_samples_is_exact(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim()
    config = make_config(
        tokenizer_dir,
        prompts_dir(A=100),
        tmp_path / "out",
        [server.url],
        budgets={"A": (None, 37)},
    )
    await run(config)
    assert recount(tmp_path / "out" / "A")[1] == 37
    assert server.stats.completed == 37


def _old_record(sample_id: str, tokens: int) -> bytes:
    return (
        orjson.dumps({"sample_id": sample_id, "text": "t", "usage": {"completion_tokens": tokens}})
        + b"\n"
    )


async def test_resume_skips_done_and_counts_both_layouts(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim()
    out = tmp_path / "out"
    (out / "A").mkdir(parents=True)
    new = (
        orjson.dumps(
            {
                "sample_id": "A-1",
                "output_ids": [7] * 50,
                "prompt_tokens": 3,
                "completion_tokens": 50,
                "finish_reason": "stop",
            }
        )
        + b"\n"
    )
    (out / "A" / "raw_responses.jsonl").write_bytes(_old_record("A-0", 100) + new)
    config = make_config(tokenizer_dir, prompts_dir(A=20), out, [server.url])
    final, events, _ = await run(config)
    assert final.datasets[0].resumed_tokens == 150
    assert final.datasets[0].resumed_samples == 2
    assert server.stats.requests == 18
    assert not any(rid.split("/")[1] in {"A-0", "A-1"} for rid in server.stats.completed_rids)
    records = read_records(out / "A")
    assert len(records) == 20 and len({str(r["sample_id"]) for r in records}) == 20
    assert any("resuming with 2 records, 150 tokens" in message for _, message in events)


async def test_resume_at_budget_does_nothing(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim()
    out = tmp_path / "out"
    (out / "A").mkdir(parents=True)
    (out / "A" / "raw_responses.jsonl").write_bytes(_old_record("A-0", 5000))
    config = make_config(
        tokenizer_dir, prompts_dir(A=20), out, [server.url], budgets={"A": (4000, None)}
    )
    final, events, _ = await run(config)
    assert server.stats.requests == 0
    assert final.datasets[0].state is DatasetState.DONE
    assert any("already at its budget" in message for _, message in events)


async def test_torn_tail_is_quarantined_and_reported(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim()
    out = tmp_path / "out"
    (out / "A").mkdir(parents=True)
    torn = b'{"sample_id": "A-3", "completion_tokens": 12, "output_ids": [1, 2'
    (out / "A" / "raw_responses.jsonl").write_bytes(_old_record("A-0", 10) + torn)
    config = make_config(tokenizer_dir, prompts_dir(A=10), out, [server.url])
    _, events, _ = await run(config)
    sides = list((out / "A").glob("raw_responses.jsonl.torn.*"))
    assert len(sides) == 1 and sides[0].read_bytes() == torn
    assert any("torn last line" in message and str(sides[0]) in message for _, message in events)
    assert recount(out / "A")[1] == 10


async def test_corrupt_record_file_refuses_with_location(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim()
    out = tmp_path / "out"
    (out / "A").mkdir(parents=True)
    (out / "A" / "raw_responses.jsonl").write_bytes(
        _old_record("A-0", 10) + b"garbage\n" + _old_record("A-1", 10)
    )
    config = make_config(tokenizer_dir, prompts_dir(A=10), out, [server.url])
    with pytest.raises(EngineError, match=r"raw_responses.jsonl:2: not valid JSON"):
        await run(config)
    assert server.stats.requests == 0


async def test_second_writer_is_refused(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim()
    out = tmp_path / "out"
    (out / "A").mkdir(parents=True)
    lock = DatasetLock(out / "A" / "run.lock")
    lock.acquire()
    try:
        config = make_config(tokenizer_dir, prompts_dir(A=10), out, [server.url])
        with pytest.raises(EngineError, match=r"already being written by pid \d+ on "):
            await run(config)
    finally:
        lock.release()


async def test_faults_are_retried_without_loss_or_duplicates(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    faults = Faults(
        error_5xx=0.1,
        rate_429=0.1,
        retry_after_s=0.05,
        reset=0.05,
        torn_json=0.1,
        timeout=0.03,
        hang_s=60,
    )
    server = await sim(faults=faults)
    config = make_config(
        tokenizer_dir,
        prompts_dir(A=80),
        tmp_path / "out",
        [server.url],
        max_retries=20,
        request_timeout_s=1.0,
    )
    final, _, _ = await run(config)
    _tokens, records = recount(tmp_path / "out" / "A")
    assert records == 80
    assert final.datasets[0].errors == 0
    assert sum(server.stats.faults.values()) > 10
    written = {str(r["sample_id"]) for r in read_records(tmp_path / "out" / "A")}
    completed = {rid.split("/")[1] for rid in server.stats.completed_rids}
    assert written == completed


async def test_client_errors_are_not_retried(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim(context_length=20)
    prompts = prompts_dir(A=5)
    config = make_config(tokenizer_dir, prompts, tmp_path / "out", [server.url])
    final, _, _ = await run(config)
    assert final.datasets[0].errors == 5
    assert server.stats.requests == 5
    errors = [
        orjson.loads(line)
        for line in (tmp_path / "out" / "A" / "errors.jsonl").read_bytes().splitlines()
    ]
    assert len(errors) == 5 and all(e["status"] == 400 for e in errors)
    assert recount(tmp_path / "out" / "A")[1] == 0


@pytest.mark.parametrize("stream_output", [False, True])
async def test_streaming_matches_non_streaming(
    stream_output: bool,
    tokenizer_dir: Path,
    prompts_dir: Callable[..., Path],
    sim: Any,
    tmp_path: Path,
) -> None:
    server = await sim(stream_output=stream_output, frame_tokens=7)
    prompts = prompts_dir(A=12)
    for stream in (False, True):
        config = make_config(
            tokenizer_dir, prompts, tmp_path / str(stream), [server.url], stream=stream
        )
        await run(config)
    plain = {r["sample_id"]: r["output_ids"] for r in read_records(tmp_path / "False" / "A")}
    streamed = {r["sample_id"]: r["output_ids"] for r in read_records(tmp_path / "True" / "A")}
    assert plain == streamed and len(plain) == 12


async def test_several_servers_share_the_load_and_a_dead_one_is_survived(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    first = await sim(tokens_per_s=5000)
    second = await sim(tokens_per_s=5000)
    dead = "http://127.0.0.1:9"
    config = make_config(
        tokenizer_dir, prompts_dir(A=60), tmp_path / "out", [first.url, dead, second.url]
    )
    _final, events, _ = await run(config)
    assert recount(tmp_path / "out" / "A")[1] == 60
    assert first.stats.completed > 5 and second.stats.completed > 5
    assert first.stats.completed + second.stats.completed == 60
    assert any(dead in message for _, message in events)


async def test_unreachable_server_is_one_clear_error(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], tmp_path: Path
) -> None:
    config = make_config(tokenizer_dir, prompts_dir(A=3), tmp_path / "out", ["http://127.0.0.1:9"])
    with pytest.raises(EngineError, match="no inference server reachable"):
        await run(config)


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


async def test_datasets_share_one_pool_in_priority_order(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    server = await sim(tokens_per_s=3000, slots=64)
    config = make_config(
        tokenizer_dir, prompts_dir(A=80, B=80), tmp_path / "out", [server.url], concurrency=16
    )
    _, _, snapshots = await run(config)
    assert any(s.datasets[1].inflight for s in snapshots), "B never ran alongside A"
    for snap in snapshots:
        first, second = snap.datasets
        assert snap.inflight <= 16
        if second.inflight:
            assert first.samples + first.inflight == 80, "B took a slot A could have used"
    assert [recount(tmp_path / "out" / name)[1] for name in "AB"] == [80, 80]


async def test_a_server_that_goes_away_and_comes_back_does_not_end_the_run(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], vocab_size: int, tmp_path: Path
) -> None:
    import asyncio

    from gen_tui.backends.sim import SimConfig, SimServer

    config_sim = SimConfig(tokens_per_s=2000, slots=16, vocab_size=vocab_size)
    server = SimServer(config_sim)
    await server.start()
    port = server.port
    completed_before = 0
    config = make_config(
        tokenizer_dir, prompts_dir(A=120), tmp_path / "out", [server.url], concurrency=16
    )
    events: list[tuple[str, str]] = []
    engine = Engine(config, on_event=lambda *e: events.append(e))
    run_task = asyncio.create_task(engine.run())
    try:
        while record_lines(tmp_path / "out" / "A") < 20:
            await asyncio.sleep(0.05)
        await server.stop()
        completed_before = server.stats.completed
        await asyncio.sleep(1.5)
        server = SimServer(config_sim, port=port)
        await server.start()
        final = await asyncio.wait_for(run_task, 60)
    finally:
        await server.stop()
    assert final.datasets[0].state is DatasetState.EXHAUSTED
    assert final.datasets[0].errors == 0
    assert recount(tmp_path / "out" / "A")[1] == 120
    assert completed_before + server.stats.completed >= 120
    assert any("retrying" in message for _, message in events)


async def test_a_dead_server_among_live_ones_is_avoided_not_retried_on_every_request(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    """A server that resets every connection: requests move to the live one at once, and
    the dead one is tried less and less (its hold-off grows with its failure streak)."""
    import asyncio

    attempts = 0

    async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal attempts
        attempts += 1
        writer.transport.abort()

    dead = await asyncio.start_server(reset, "127.0.0.1", 0)
    dead_url = f"http://127.0.0.1:{dead.sockets[0].getsockname()[1]}"
    server = await sim(tokens_per_s=4000, slots=16)
    config = make_config(
        tokenizer_dir, prompts_dir(A=300), tmp_path / "out", [dead_url, server.url], concurrency=8
    )
    try:
        final, _, _ = await run(config)
    finally:
        dead.close()
    assert recount(tmp_path / "out" / "A")[1] == 300 and final.datasets[0].errors == 0
    assert 0 < attempts < 300 // 5, f"the dead server was tried {attempts} times for 300 samples"


async def test_stream_output_frames_keep_the_whole_text(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    """--stream-output servers send only the new ids and text per frame: the record must
    hold all of it, exactly as a cumulative stream or a plain response gives it."""
    prompts = prompts_dir(A=40)
    texts = {}
    for name, stream_output in (("cumulative", False), ("incremental", True)):
        server = await sim(tokens_per_s=20000, slots=16, stream_output=stream_output)
        config = make_config(
            tokenizer_dir, prompts, tmp_path / name, [server.url], stream=True, concurrency=8
        )
        await run(config)
        records = read_records(tmp_path / name / "A")
        assert len(records) == 40
        texts[name] = {r["sample_id"]: r["text"] for r in records}
    assert texts["incremental"] == texts["cumulative"]
    assert all(len(t.split()) > 1 for t in texts["incremental"].values() if t)


async def test_batched_tokenizing_sends_each_prompts_own_ids_and_isolates_a_bad_one(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    """Prompts are tokenized 32 to a call; each must still get its own ids, and a prompt
    the chat template refuses must be named and skipped alone, not sink its batch."""
    from gen_tui.backends.prompts import Prompt, iter_prompts
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


async def test_a_pool_no_larger_than_the_servers_batch_is_pointed_out(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    """Two servers running 8 each: 16 in flight leaves no queue (said once, with a size that
    does), 24 keeps one (nothing said)."""
    servers = [await sim(slots=8), await sim(slots=8)]
    prompts = prompts_dir(A=20)
    said = []
    for concurrency in (16, 24):
        config = make_config(
            tokenizer_dir,
            prompts,
            tmp_path / f"out-{concurrency}",
            [s.url for s in servers],
            concurrency=concurrency,
        )
        _, events, _ = await run(config)
        said.append([text for _, text in events if "running batch" in text])
    assert len(said[0]) == 1, said
    assert "--concurrency 16 is not above" in said[0][0]
    assert "max_running_requests 16" in said[0][0] and "about 24 keeps a queue" in said[0][0]
    assert said[1] == []
