"""`--turns all` (issue 35): whole conversations regenerated turn by turn, in memory
against a scripted client: each turn's request carries the regenerated history, one turn
in flight per conversation, a record per turn, and a resume that never sends a turn with
a record again."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import orjson
import pytest

from gen_tui.app.dialogs.peek import sample_text
from gen_tui.backends.budget.expected import ExpectedLengths
from gen_tui.backends.budget.lengths import InFlight
from gen_tui.backends.budget.rules import Budget, eta_seconds
from gen_tui.backends.clients.base import Request
from gen_tui.backends.clients.results import Generation, RequestFailed
from gen_tui.backends.clients.scripted import ScriptedClient
from gen_tui.backends.config.file import ConfigError, load_config
from gen_tui.backends.config.run import DatasetSpec, EngineConfig, EngineError
from gen_tui.backends.engine import Engine
from gen_tui.backends.export.exporter import ExportOptions, Tally, export_run
from gen_tui.backends.export.verify import verify_dataset
from gen_tui.backends.progress.snapshot import DatasetSnapshot, DatasetState
from gen_tui.backends.store.conversations import Turns, turn_count, turn_key, turn_messages
from gen_tui.backends.store.progress_file import ProgressFile
from gen_tui.backends.store.records import PROGRESS_FILE, RAW_FILE, Completion, scan_records
from gen_tui.backends.store.samples import parse_sample
from gen_tui.backends.store.tails import Tail
from gen_tui.backends.tokenizer import encode_messages, load_tokenizer
from gen_tui.widgets.dataset_panel import sample_label
from tests.support.engine import with_hooks

URL = "http://scripted"


def conversation(index: int, turns: int) -> dict[str, object]:
    """A source line of `turns` user turns, each followed by another model's answer."""
    messages: list[dict[str, str]] = [{"role": "system", "content": "be brief"}]
    for turn in range(1, turns + 1):
        messages.append({"role": "user", "content": f"c{index} q{turn}"})
        messages.append({"role": "assistant", "content": f"OLD c{index} a{turn}"})
    return {"id": f"c{index}", "messages": messages}


def write_conversations(path: Path, turns: list[int]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [orjson.dumps(conversation(i, n)) for i, n in enumerate(turns)]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def config(tmp_path: Path, turns: list[int], **overrides: object) -> EngineConfig:
    prompts = write_conversations(tmp_path / "prompts" / "chat.jsonl", turns)
    options: dict[str, object] = {
        "datasets": [DatasetSpec("chat", prompts)],
        "server_urls": [URL],
        "tokenizer": "",
        "output_dir": tmp_path / "out",
        "concurrency": 4,
        "sampling": {"max_new_tokens": 50},
        "snapshot_interval_s": 0.01,
        "progress_interval_s": 0.05,
        "turns": "all",
        "seed": 1,
    }
    options.update(overrides)
    return EngineConfig(**with_hooks(options))  # type: ignore[arg-type]


def reply(request: Request) -> Generation:
    """The scripted answer names what it answers: the last user turn of its request."""
    question = request.messages[-1]["content"]
    return Generation(
        output_ids=[1, 2, 3],
        text=f"NEW {question}",
        prompt_tokens=len(request.messages),
        completion_tokens=3,
        finish_reason="stop",
        latency_s=0.0,
    )


def records(tmp_path: Path) -> list[dict[str, object]]:
    raw = (tmp_path / "out" / "chat" / RAW_FILE).read_bytes()
    return [orjson.loads(line) for line in raw.splitlines() if line.strip()]


def test_turn_k_carries_the_system_prompt_user_turns_and_regenerated_answers() -> None:
    messages = conversation(0, 3)["messages"]
    assert isinstance(messages, list)
    assert turn_count(messages) == 3
    assert turn_messages(messages, 1, []) == messages[:2]
    third = turn_messages(messages, 3, ["A1", "A2"])
    assert [m["content"] for m in third] == ["be brief", "c0 q1", "A1", "c0 q2", "A2", "c0 q3"]
    assert [m["role"] for m in third] == ["system"] + ["user", "assistant"] * 2 + ["user"]


def test_turns_is_a_setting_with_one_default(tmp_path: Path) -> None:
    assert EngineConfig(datasets=[], server_urls=[URL]).turns is Turns.LAST
    with pytest.raises(EngineError, match="turns"):
        EngineConfig(datasets=[], server_urls=[URL], turns="some")  # type: ignore[arg-type]
    with pytest.raises(EngineError, match="cannot go through --api openai-batch"):
        EngineConfig(datasets=[], server_urls=[URL], turns="all", api="openai-batch")  # type: ignore[arg-type]
    config_file = tmp_path / "gen-tui.toml"
    config_file.write_text('[run]\nturns = "all"\n')
    assert load_config(config_file).run["turns"] == "all"
    config_file.write_text('[run]\nturns = "every"\n')
    with pytest.raises(ConfigError, match=r"run\.turns 'every' is not one of last, all"):
        load_config(config_file)


async def test_every_turn_is_regenerated_in_order_with_the_regenerated_history(
    tmp_path: Path,
) -> None:
    in_flight: dict[str, int] = {}
    most: dict[str, int] = {}

    async def script(url: str, request: Request) -> Generation:
        conv = request.rid.split("/")[1].split("#")[0]
        in_flight[conv] = in_flight.get(conv, 0) + 1
        most[conv] = max(most.get(conv, 0), in_flight[conv])
        await asyncio.sleep(0.01)
        in_flight[conv] -= 1
        return reply(request)

    client = ScriptedClient(script)
    turns = [3, 5, 4, 8, 3, 6]
    final = await asyncio.wait_for(Engine(config(tmp_path, turns), client=client).run(), 30)
    assert max(most.values()) == 1  # one turn in flight per conversation
    sent = [request for _, request in client.sent]
    assert len(sent) == sum(turns)
    for request in sent:  # no source answer is ever sent; each earlier turn's is the new one
        contents = [m["content"] for m in request.messages if m["role"] == "assistant"]
        questions = [m["content"] for m in request.messages if m["role"] == "user"]
        assert contents == [f"NEW {q}" for q in questions[:-1]]
    written = records(tmp_path)
    assert len(written) == sum(turns)
    by_conv: dict[str, list[int]] = {}
    for record in written:
        assert record["turns"] == turns[int(str(record["sample_id"])[1:])]
        by_conv.setdefault(str(record["sample_id"]), []).append(int(record["turn"]))  # type: ignore[call-overload]
    assert all(order == list(range(1, len(order) + 1)) for order in by_conv.values())
    (done,) = final.datasets
    assert (done.samples, done.tokens) == (sum(turns), 3 * sum(turns))
    scan = scan_records(tmp_path / "out" / "chat" / RAW_FILE)
    assert {f"c{i}" for i in range(len(turns))} <= scan.done and scan.duplicates == 0


async def test_a_resume_sends_only_the_turns_without_a_record_with_those_on_disk_as_history(
    tmp_path: Path,
) -> None:
    def failing(url: str, request: Request) -> Generation:
        if request.messages[-1]["content"] == "c1 q3":  # conversation c1 stops at turn 3
            raise RequestFailed("refused", retry=False, status=400)
        return reply(request)

    cfg = config(tmp_path, [2, 5])
    await asyncio.wait_for(Engine(cfg, client=ScriptedClient(failing)).run(), 30)
    scan = scan_records(tmp_path / "out" / "chat" / RAW_FILE)
    assert "c0" in scan.done and "c1" not in scan.done
    assert scan.turn_counts == {"c0": 2, "c1": 5}
    assert turn_key("c1", 2) in scan.done and turn_key("c1", 3) not in scan.done

    client = ScriptedClient(lambda url, request: reply(request))
    await asyncio.wait_for(Engine(cfg, client=client).run(), 30)
    sent = [request.messages[-1]["content"] for _, request in client.sent]
    assert sent == ["c1 q3", "c1 q4", "c1 q5"]
    first = client.sent[0][1]
    assert [m["content"] for m in first.messages if m["role"] == "assistant"] == [
        "NEW c1 q1",
        "NEW c1 q2",
    ]
    written = [(r["sample_id"], r["turn"]) for r in records(tmp_path)]
    assert sorted(written) == [("c0", 1), ("c0", 2)] + [("c1", t) for t in range(1, 6)]
    assert "c1" in scan_records(tmp_path / "out" / "chat" / RAW_FILE).done


def test_the_scan_reads_a_turn_off_the_head_as_the_full_parse_does(tmp_path: Path) -> None:
    raw = tmp_path / RAW_FILE
    fast = Completion("c", 4, 1, "stop", [1, 2, 3, 4], turn=1, turns=2).to_line()
    slow = b'{"turn":2,"turns":2,' + Completion("c", 5, 1, "length", None).to_line()[1:]
    raw.write_bytes(fast + slow)
    scan = scan_records(raw)
    assert scan.done == {turn_key("c", 1), turn_key("c", 2), "c"}
    assert (scan.tokens, scan.records, scan.duplicates, scan.truncated) == (9, 2, 0, 1)


async def test_verify_names_a_gap_or_a_duplicate_turn_in_one_line(tmp_path: Path) -> None:
    cfg = config(tmp_path, [3, 4])
    await asyncio.wait_for(Engine(cfg, client=ScriptedClient(lambda u, r: reply(r))).run(), 30)
    folder = tmp_path / "out" / "chat"
    raw = folder / RAW_FILE
    assert verify_dataset(folder, {}).ok
    lines = raw.read_bytes().splitlines(keepends=True)
    turn_2 = next(i for i, line in enumerate(lines) if b'"turn":2,' in line)
    sample = orjson.loads(lines[turn_2])["sample_id"]

    raw.write_bytes(b"".join([*lines, lines[turn_2]]))
    verdict = verify_dataset(folder, {})
    assert verdict.problems == 1
    assert f"conversation {sample!r}: turn 2 again" in verdict.first[0]

    raw.write_bytes(b"".join(lines[:turn_2] + lines[turn_2 + 1 :]))
    verdict = verify_dataset(folder, {})
    assert verdict.problems == 1
    assert f"conversation {sample!r}: turn 3 follows turn 1: turn 2 missing" in verdict.first[0]

    unfinished = [line for line in lines if b'"turn":3,"turns":3' not in line]
    raw.write_bytes(b"".join(unfinished))
    verdict = verify_dataset(folder, {})
    assert verdict.ok and "1 conversation not finished yet" in verdict.line()


async def test_export_puts_every_regenerated_turn_in_the_loss_mask_and_cuts_whole_turns(
    tmp_path: Path, tokenizer_dir: Path
) -> None:
    tokenizer = load_tokenizer(str(tokenizer_dir))

    def script(url: str, request: Request) -> Generation:
        text = f"answer to {request.messages[-1]['content']}"
        ids = tokenizer.encode(text, add_special_tokens=False)
        assert request.input_ids == encode_messages(tokenizer, request.messages)
        return Generation(ids, text, len(request.input_ids or []), len(ids), "stop", 0.0)

    turns = [3, 4]
    cfg = config(tmp_path, turns, tokenizer=str(tokenizer_dir))
    client = ScriptedClient(script, needs_input_ids=True)
    await asyncio.wait_for(Engine(cfg, client=client).run(), 30)
    written = {(r["sample_id"], r["turn"]): r for r in records(tmp_path)}

    def export(fmt: str, max_length: int | None = None) -> tuple[list[dict[str, Any]], Tally]:
        rows: list[bytes] = []
        tally = export_run(
            tmp_path / "out", None, ExportOptions(fmt, max_length), rows.append, lambda _: None
        )
        return [orjson.loads(row) for row in rows], tally

    rows, tally = export("specforge")
    assert (tally.records, tally.exported) == (7, 7)
    end = tokenizer.encode("<|end|>\n", add_special_tokens=False)
    assert len(end) == 2
    for row, count in zip(rows, turns, strict=True):
        ids, mask = row["input_ids"], row["loss_mask"]
        assert len(ids) == len(mask) and set(mask) == {0, 1}  # SpecForge's prompts_path rows
        spans, start = [], None
        for at, bit in enumerate([*mask, 0]):
            if bit and start is None:
                start = at
            elif not bit and start is not None:
                spans.append(ids[start:at])
                start = None
        sample = row["metadata"]["sample_id"]
        # Each turn's answer, then the template's end-of-turn markup, as the trainers mask it.
        assert spans == [written[(sample, t)]["output_ids"] + end for t in range(1, count + 1)]
        first = client.sent[
            [r.messages[-1]["content"] for _, r in client.sent].index(f"{sample} q1")
        ][1]
        assert ids[: len(first.input_ids or [])] == first.input_ids
        assert row["metadata"]["turns"] == count

    rows, _ = export("sharegpt")
    assistant = [m["content"] for m in rows[1]["conversations"] if m["role"] == "assistant"]
    assert assistant == [f"answer to c1 q{t}" for t in range(1, 5)]

    full = len(export("specforge")[0][1]["input_ids"])
    rows, tally = export("specforge", max_length=full - 1)
    assert rows[1]["metadata"]["turns"] == 3 and sum(rows[1]["loss_mask"]) < full
    assert tally.skipped["over --max-length"] == 1 and tally.exported == 6


def test_the_budget_counts_a_begun_conversations_turns_to_come_and_plans_a_new_one_whole() -> None:
    expected = ExpectedLengths(100)
    for _ in range(10):
        expected.observe(10)
    alone = [InFlight(0.0, 100)]
    begun = [InFlight(0.0, 100, turns_left=5)]
    mean = expected.mean(2)
    assert expected.expected(alone, 100) == pytest.approx(2 * mean)
    assert expected.expected(begun, 100) == pytest.approx(7 * mean)
    assert expected.expected(alone, 100, turns=4) == pytest.approx(5 * mean)
    room = round(3 * mean)
    assert expected.allows(room, 0, alone, 100)
    assert not expected.allows(room, 0, begun, 100)
    assert not expected.allows(room, 0, alone, 100, turns=4)


@pytest.mark.parametrize(
    ("turns", "tokens"),
    [([2, 8, 2, 2], 500), ([2, 2, 8, 2], 200)],
    ids=["long-second", "long-third"],
)
async def test_strict_reserves_the_longest_conversation_whole_and_never_cuts_one(
    tmp_path: Path, turns: list[int], tokens: int
) -> None:
    """Strict with every answer at its cap (50), a budget of 500. Conversations of 2, 8, 2
    and 2 turns: planned at the mean (round(3.5) = 4 turns), the begun ones counted as one
    turn until their task first ran, all four went out at once (700 tokens' worth) and the
    turns that would pass 500 were sent and dropped: conversations left unfinished at the
    budget (against the simulator, 5 of 8 at a budget of 5,000). Now a new conversation is
    reserved at the most turns queued (8 x 50), a begun one at all its turns from its
    dispatch: the first two, whole, and no request sent that the budget had no room for.
    With the 8-turn one third, the mean let it out beside the two begun (100 + 100 + 4 x 50
    <= 500) and it was cut at 6 turns; reserved at 8 it stays out, and with it the rest
    (strict cannot know a later one is shorter): 200 tokens, short but never past."""

    def capped(url: str, request: Request) -> Generation:
        return dataclasses.replace(reply(request), output_ids=list(range(50)), completion_tokens=50)

    cfg = config(tmp_path, turns, budget_mode="strict", datasets=[])
    prompts = tmp_path / "prompts" / "chat.jsonl"
    cfg.datasets = [DatasetSpec("chat", prompts, 500)]
    client = ScriptedClient(capped)
    final = await asyncio.wait_for(Engine(cfg, client=client).run(), 30)
    written = records(tmp_path)
    on_disk: dict[object, list[object]] = {}
    for record in written:
        on_disk.setdefault(record["sample_id"], []).append(record["turn"])
    assert on_disk == {"c0": list(range(1, turns[0] + 1)), "c1": list(range(1, turns[1] + 1))}
    # No turn sent whose answer the strict budget then threw away (the others' first turns
    # were, and the run said the server had exceeded max_new_tokens).
    assert len(client.sent) == len(written) == tokens // 50
    assert sum(int(str(record["completion_tokens"])) for record in written) == tokens
    assert final.datasets[0].state is DatasetState.DONE
    assert verify_dataset(tmp_path / "out" / "chat", {}).ok


async def test_a_conversations_turns_go_to_the_server_that_answered_its_first(
    tmp_path: Path,
) -> None:
    async def script(url: str, request: Request) -> Generation:
        await asyncio.sleep(0.01)  # in flight a while: the least loaded server differs
        return reply(request)

    client = ScriptedClient(script)
    urls = ["http://one", "http://two"]
    cfg = config(tmp_path, [4, 5, 3, 6, 4, 5, 3, 4], server_urls=urls)
    await asyncio.wait_for(Engine(cfg, client=client).run(), 30)
    servers: dict[str, set[str]] = {}
    for url, request in client.sent:
        servers.setdefault(request.rid.split("/")[1].split("#")[0], set()).add(url)
    assert all(len(used) == 1 for used in servers.values())
    assert set().union(*servers.values()) == set(urls)  # both served: affinity, not one server


async def test_a_resume_at_its_budget_still_finishes_the_conversations_begun_and_no_other(
    tmp_path: Path,
) -> None:
    def failing(url: str, request: Request) -> Generation:
        if request.messages[-1]["content"] == "c1 q3":
            raise RequestFailed("refused", retry=False, status=400)
        return reply(request)

    await asyncio.wait_for(
        Engine(config(tmp_path, [2, 5, 3]), client=ScriptedClient(failing)).run(), 30
    )
    assert len(records(tmp_path)) == 2 + 2 + 3
    at_budget = config(tmp_path, [2, 5, 3], datasets=[])
    at_budget.datasets = [DatasetSpec("chat", tmp_path / "prompts" / "chat.jsonl", 10)]
    client = ScriptedClient(lambda url, request: reply(request))
    final = await asyncio.wait_for(Engine(at_budget, client=client).run(), 30)
    assert [r.messages[-1]["content"] for _, r in client.sent] == ["c1 q3", "c1 q4", "c1 q5"]
    assert final.datasets[0].state.finished
    check = scan_records(tmp_path / "out" / "chat" / RAW_FILE)
    assert {"c0", "c1", "c2"} <= check.done and check.duplicates == 0


async def test_the_answers_left_count_turns_with_turns_all(tmp_path: Path) -> None:
    seen: list[int | None] = []
    engine: Engine | None = None

    def script(url: str, request: Request) -> Generation:
        assert engine is not None
        seen.append(engine.snapshot().datasets[0].prompts_left)
        return reply(request)

    turns = [3, 5, 4]
    engine = Engine(config(tmp_path, turns, concurrency=1), client=ScriptedClient(script))
    await asyncio.wait_for(engine.run(), 30)
    # One conversation at a time: before each turn, the turns not written yet, those of the
    # conversations not begun at the mean turn count (4 here): never the conversations alone.
    truth = list(range(sum(turns), 0, -1))
    assert all(abs(got - want) <= 1 for got, want in zip(seen, truth, strict=True)), seen  # type: ignore[operator]
    assert seen[-5:] == [5, 4, 3, 2, 1]  # the last conversation begun: exact


async def test_the_prompt_cap_counts_what_is_sent_not_the_sources_own_answers(
    tmp_path: Path, tokenizer_dir: Path
) -> None:
    cfg = config(tmp_path, [], tokenizer=str(tokenizer_dir), max_prompt_tokens=300)
    path = cfg.datasets[0].prompts
    line = conversation(0, 3)
    for message in line["messages"]:  # type: ignore[attr-defined]
        if message["role"] == "assistant":
            message["content"] = "long old answer " * 200
    path.write_bytes(orjson.dumps(line) + b"\n")
    client = ScriptedClient(lambda url, request: reply(request), needs_input_ids=True)
    await asyncio.wait_for(Engine(cfg, client=client).run(), 30)
    assert [r.messages[-1]["content"] for _, r in client.sent] == ["c0 q1", "c0 q2", "c0 q3"]


async def test_a_resume_whose_begun_conversation_cannot_be_sent_still_ends(
    tmp_path: Path, tokenizer_dir: Path
) -> None:
    def failing(url: str, request: Request) -> Generation:
        if request.messages[-1]["content"] == "c1 q3":
            raise RequestFailed("refused", retry=False, status=400)
        return reply(request)

    cfg = config(tmp_path, [2, 5], tokenizer=str(tokenizer_dir))
    await asyncio.wait_for(Engine(cfg, client=ScriptedClient(failing)).run(), 30)
    # Now every prompt is over the cap, c1's included: it is skipped, and the run ends.
    tight = config(tmp_path, [2, 5], tokenizer=str(tokenizer_dir), max_prompt_tokens=2)
    tight.datasets = [DatasetSpec("chat", tight.datasets[0].prompts, 10)]
    events: list[str] = []
    client = ScriptedClient(lambda url, request: reply(request))
    engine = Engine(tight, on_event=lambda _level, text: events.append(text), client=client)
    final = await asyncio.wait_for(engine.run(), 20)
    assert client.sent == [] and final.datasets[0].state.finished
    assert any("over the 2 allowed" in text for text in events)


async def test_the_panel_and_progress_json_count_conversations_and_turns(tmp_path: Path) -> None:
    turns = [3, 4, 5]
    engine = Engine(config(tmp_path, turns), client=ScriptedClient(lambda u, r: reply(r)))
    final = await asyncio.wait_for(engine.run(), 30)
    (done,) = final.datasets
    assert (done.samples, done.conversations) == (12, 3)
    assert sample_label(done).startswith("12 turns · 3 conv")
    written = ProgressFile.read(tmp_path / "out" / "chat" / PROGRESS_FILE)
    assert written is not None and written.conversations == 3


def test_v_names_each_answers_turn() -> None:
    line = Completion("c7", 3, 9, "stop", [1, 2, 3], "hello", turn=2, turns=5).to_line()
    sample = parse_sample(line.decode())
    assert sample is not None and sample.turn == (2, 5)
    shown = sample_text([sample], Tail()).plain
    assert "#c7 · turn 2 of 5 · stop" in shown
    plain = parse_sample(Completion("c8", 3, 9, "stop", [1, 2, 3], "hi").to_line().decode())
    assert plain is not None and plain.turn is None


def test_max_samples_progress_and_eta_count_conversations() -> None:
    """With `--turns all` `--max-samples` counts conversations: the panel's fraction is
    conversations over the limit (not turns, which would read 100% at 2 of 5), and the ETA
    turns the conversations left into answers at the dataset's turns per conversation."""
    snap = DatasetSnapshot(
        name="chat", state=DatasetState.ACTIVE, tokens=1_200, samples=12, max_tokens=None,
        max_samples=5, budget_mode="predictive", inflight=2, errors=0, malformed=0,
        mean_tokens=100.0, tok_s=1_000.0, samples_s=10.0, eta_s=None, resumed_tokens=0,
        resumed_samples=0, started_at=0.0, updated_at=1.0, last_record_at=1.0, pid=1,
        host="box", conversations=2,
    )  # fmt: skip
    assert snap.fraction == pytest.approx(2 / 5)
    assert dataclasses.replace(snap, conversations=None).fraction == 1.0  # --turns last
    budget = Budget(None, 5)
    # 3 conversations left at 6 turns each, 10 turns a second: 1.8 s.
    assert eta_seconds(budget, 1_200, 2, 1_000.0, 10.0, None, 6.0) == pytest.approx(1.8)
    assert eta_seconds(budget, 1_200, 2, 1_000.0, 10.0) == pytest.approx(0.3)
