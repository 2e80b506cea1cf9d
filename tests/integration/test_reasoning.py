"""A thinking model's reasoning on the OpenAI path (issue 17): kept in the record, in the ids.

Each reasoning shape servers send (SGLang's and vLLM's `reasoning_content`, OpenRouter's
`reasoning` and `reasoning_details`, streamed and not) is parsed alone, then sent by the
simulator's thinking profile to real engine runs and a real `gen-tui run`, whose records
must hold the trace and ids that decode to the turn as the chat template renders it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from gen_tui.backends.clients.limits import Limits
from gen_tui.backends.clients.openai_api import chat
from gen_tui.backends.clients.reasoning import reasoning_of
from gen_tui.backends.clients.results import Generation, RequestFailed
from gen_tui.backends.sim import OPENAI_REASONING, LengthProfile, SimConfig
from gen_tui.backends.sim.cli import main as sim_main
from gen_tui.backends.tokenizer import encode_text, encode_turn, load_tokenizer
from tests.support.engine import make_config, run
from tests.support.records import read_records
from tests.support.run_output import gen_tui
from tests.support.runs import ENV, finish, run_args, spawn

THINKING = [shape for shape in OPENAI_REASONING if shape != "none"]
MESSAGES = [{"role": "user", "content": "explain how binary search works"}]

# Qwen3's assistant-turn logic (its chat template, cut to user and assistant turns, with the
# test tokenizer's special tokens): `reasoning_content` if given, else a `<think>` block
# split out of content; the last turn always gets a think block.
QWEN3_LIKE = (
    "{%- for message in messages %}"
    "{%- if message.role == 'user' %}{{- '<|user|>\\n' + message.content + '<|end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}"
    "{%- set content = message.content %}{%- set reasoning_content = '' %}"
    "{%- if message.reasoning_content is string %}"
    "{%- set reasoning_content = message.reasoning_content %}"
    "{%- elif '</think>' in content %}"
    "{%- set reasoning_content = content.split('</think>')[0].rstrip('\\n')"
    ".split('<think>')[-1].lstrip('\\n') %}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') %}{%- endif %}"
    "{{- '<|assistant|>\\n<think>\\n' + reasoning_content.strip('\\n') + '\\n</think>\\n\\n'"
    " + content.lstrip('\\n') + '<|end|>\\n' }}"
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|assistant|>\\n' }}{%- endif %}"
)
# DeepSeek-R1's rule for past assistant turns: everything up to `</think>` is dropped.
R1_LIKE = (
    "{%- for m in messages %}{%- set content = m['content'] %}"
    "{%- if m['role'] == 'assistant' and '</think>' in content %}"
    "{%- set content = content.split('</think>')[-1] %}{%- endif %}"
    "<|{{ m['role'] }}|>\n{{ content }}<|end|>\n{%- endfor %}"
    "{%- if add_generation_prompt %}<|assistant|>\n{%- endif %}"
)


def think(reasoning: str, text: str) -> str:
    """The turn as the model wrote it, in the form the test tokenizer's template renders."""
    return f"<think>\n{reasoning}\n</think>\n\n{text}"


# ---- parsing each shape -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"reasoning_content": "a b"}, "a b"),
        ({"reasoning": "a b"}, "a b"),
        ({"reasoning_details": [{"type": "reasoning.text", "text": "a b"}]}, "a b"),
        ({"reasoning_details": [{"type": "reasoning.summary", "summary": "sum"}]}, "sum"),
        (
            {
                "reasoning_details": [
                    {"type": "reasoning.text", "text": "a "},
                    {"type": "reasoning.encrypted", "data": "b3BhcXVl"},
                    {"type": "reasoning.text", "text": "b"},
                ]
            },
            "a b",
        ),
        # OpenRouter sends the same text twice: kept once.
        (
            {"reasoning": "a b", "reasoning_details": [{"type": "reasoning.text", "text": "a b"}]},
            "a b",
        ),
        ({"reasoning_details": [{"type": "reasoning.encrypted", "data": "b3BhcXVl"}]}, None),
        ({"content": "answer"}, None),
        ({"reasoning": None, "reasoning_content": ""}, None),
    ],
)
def test_each_reasoning_shape_is_read_once(fields: dict[str, Any], expected: str | None) -> None:
    assert reasoning_of(fields, "the response's message") == expected


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"reasoning": 5}, "reasoning of type int"),
        ({"reasoning_content": ["x"]}, "reasoning_content of type list"),
        ({"reasoning_details": "x"}, "reasoning_details of type str"),
        ({"reasoning_details": ["x"]}, "reasoning_details entry of type str"),
        ({"reasoning_details": [{"type": "reasoning.text", "text": 3}]}, "text of type int"),
        # An unhashable type was a bare TypeError from dict.get (found by mypy).
        ({"reasoning_details": [{"type": ["reasoning.text"]}]}, "type of type list"),
        # A bad field is named even when a good one would have been used.
        ({"reasoning": "fine", "reasoning_details": 7}, "reasoning_details of type int"),
    ],
)
def test_a_wrongly_typed_reasoning_field_is_a_named_failure(
    fields: dict[str, Any], named: str
) -> None:
    with pytest.raises(RequestFailed, match=named) as caught:
        reasoning_of(fields, "a stream chunk's delta")
    assert caught.value.retry and "a stream chunk's delta" in caught.value.reason


async def _streamed(events: list[dict[str, Any]], repeat: int = 1, **extra: Any) -> Generation:
    """One streamed `chat` against a server that sends `events` (`repeat` times) as SSE, then
    `[DONE]`; `extra`: more of `chat`'s arguments."""

    async def answer(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for _ in range(repeat):
            for event in events:
                await response.write(b"data: " + orjson.dumps(event) + b"\n\n")
        await response.write(b"data: [DONE]\n\n")
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        host, port = runner.addresses[0][:2]
        async with aiohttp.ClientSession() as session:
            return await chat(
                session,
                f"http://{host}:{port}",
                messages=MESSAGES,
                sampling={},
                model=None,
                api_key=None,
                key_hint="",
                stream=True,
                **extra,
            )
    finally:
        await runner.cleanup()


async def test_streamed_reasoning_pieces_join_and_are_not_doubled() -> None:
    """OpenRouter's stream: `delta.reasoning` and `delta.reasoning_details` with the same
    text in one chunk, then content, then usage."""

    def delta(**fields: Any) -> dict[str, Any]:
        return {"choices": [{"delta": fields, "finish_reason": None}]}

    events = [
        delta(role="assistant", content=""),
        delta(
            content="",
            reasoning="first ",
            reasoning_details=[{"type": "reasoning.text", "text": "first "}],
        ),
        delta(
            content="",
            reasoning="second",
            reasoning_details=[{"type": "reasoning.text", "text": "second"}],
        ),
        delta(content="the answer"),
        {"choices": [{"delta": {}, "finish_reason": "stop"}]},
        {"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 5}},
    ]
    generation = await _streamed(events)
    assert generation.reasoning == "first second"
    assert generation.text == "the answer"
    assert generation.completion_tokens == 5


async def test_endless_reasoning_fails_at_the_size_bound() -> None:
    """Reasoning is held like the answer: a stream of thoughts without end is cut off."""
    piece = {"choices": [{"delta": {"reasoning_content": "x" * 1000}, "finish_reason": None}]}
    with pytest.raises(RequestFailed, match="response over 65,536 bytes"):
        await _streamed([piece], repeat=200, limits=Limits(64 << 10, 5.0))


# ---- the simulator's thinking profile -----------------------------------------------------


@pytest.mark.parametrize("shape", THINKING)
async def test_the_simulator_sends_reasoning_in_each_shape_streamed_or_not(
    shape: str, sim: Any
) -> None:
    """Streamed or not, the same prompt gets the same trace and answer, and usage counts
    both (the simulator's tokens are one word each)."""
    server = await sim(openai_reasoning=shape, default_profile=LengthProfile(mean=60, cv=0.1))
    got = []
    async with aiohttp.ClientSession() as session:
        for stream in (False, True):
            got.append(
                await chat(
                    session,
                    server.url,
                    messages=MESSAGES,
                    model=None,
                    api_key=None,
                    key_hint="",
                    sampling={"max_new_tokens": 500},
                    stream=stream,
                )
            )
    plain, streamed = got
    assert plain.reasoning and plain.text
    assert (streamed.reasoning, streamed.text) == (plain.reasoning, plain.text)
    words = len(plain.reasoning.split()) + len(plain.text.split())
    assert plain.completion_tokens == streamed.completion_tokens == words


def test_the_sim_command_takes_a_thinking_profile(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        sim_main(["--reasoning", "telepathy", "--port", "0"])
    assert exited.value.code == 2
    assert "--reasoning: invalid choice: 'telepathy'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="openai_reasoning must be one of"):
        SimConfig(openai_reasoning="telepathy").validate()


# ---- the ids of the whole turn ------------------------------------------------------------


@pytest.fixture(scope="module")
def tokenizers(tokenizer_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The test tokenizer with its own template, and with Qwen3's and R1's turn rules."""
    made = {"plain": load_tokenizer(str(tokenizer_dir))}
    for name, template in (("qwen3", QWEN3_LIKE), ("r1", R1_LIKE)):
        folder = tmp_path_factory.mktemp(name) / "tok"
        shutil.copytree(tokenizer_dir, folder)
        tokenizer = load_tokenizer(str(folder))
        tokenizer.chat_template = template
        made[name] = tokenizer
    return made


@pytest.mark.parametrize("name", ["plain", "qwen3", "r1"])
def test_turn_ids_hold_the_reasoning_as_the_template_renders_it(
    name: str, tokenizers: dict[str, Any]
) -> None:
    tokenizer = tokenizers[name]
    reasoning, text = "describe the time complexity", "the sum of two numbers"
    ids = encode_turn(tokenizer, MESSAGES, text, reasoning)
    assert tokenizer.decode(ids) == think(reasoning, text)
    if name == "qwen3":  # the template's own rendering, cut after the generation prompt
        prompt = tokenizer.apply_chat_template(
            MESSAGES, add_generation_prompt=True, return_dict=False
        )
        turn = {"role": "assistant", "content": text, "reasoning_content": reasoning}
        full = tokenizer.apply_chat_template([*MESSAGES, turn], return_dict=False)
        assert full[: len(prompt)] == prompt
        end = encode_text(tokenizer, "<|end|>")
        assert full[len(prompt) :] == ids + end + encode_text(tokenizer, "\n")
    # Without reasoning nothing changes: the answer's ids alone.
    assert encode_turn(tokenizer, MESSAGES, text, None) == encode_text(tokenizer, text)


def test_a_trace_that_is_part_of_the_answer_is_not_taken_as_rendered(
    tokenizers: dict[str, Any],
) -> None:
    """The plain template ignores `reasoning_content`; the trace also appearing in the
    answer must not make that form look as if it kept the trace."""
    tokenizer = tokenizers["plain"]
    ids = encode_turn(tokenizer, MESSAGES, "sum the numbers", "sum")
    assert tokenizer.decode(ids) == think("sum", "sum the numbers")


# ---- whole runs ---------------------------------------------------------------------------


def _config(tokenizer_dir: Path, prompts: Path, out: Path, url: str, **extra: Any) -> Any:
    return make_config(
        tokenizer_dir,
        prompts,
        out,
        [url],
        api="openai",
        model="sim-model",
        sim_dataset_header=True,
        **extra,
    )


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("shape", THINKING)
async def test_a_thinking_run_keeps_the_reasoning_and_its_ids(
    shape: str,
    stream: bool,
    tokenizer_dir: Path,
    tokenizers: dict[str, Any],
    prompts_dir: Callable[..., Path],
    sim: Any,
    tmp_path: Path,
) -> None:
    server = await sim(openai_reasoning=shape, profiles={"A": LengthProfile(mean=80)})
    config = _config(tokenizer_dir, prompts_dir(A=8), tmp_path / "out", server.url, stream=stream)
    final, _, _ = await run(config)
    records = read_records(tmp_path / "out" / "A")
    assert len(records) == 8 and final.datasets[0].tokens == sum(
        r["completion_tokens"] for r in records
    )
    tokenizer = tokenizers["plain"]
    for record in records:
        reasoning, text = record["reasoning"], record["text"]
        assert reasoning, record
        assert tokenizer.decode(record["output_ids"]) == think(reasoning, text or "")
        assert record["ids_gap"] == len(record["output_ids"]) - record["completion_tokens"]
        # The tokenizer knows the simulated model's words, so the gap is the think markup the
        # template adds (the server counted words only), give or take a first word; ids of
        # the answer alone would be short by the whole trace.
        markup = len(encode_text(tokenizer, think("", "")))
        assert abs(record["ids_gap"] - markup) <= 2, (record["ids_gap"], markup)
    keys = list(records[0])
    assert keys[:5] == [
        "sample_id",
        "completion_tokens",
        "prompt_tokens",
        "finish_reason",
        "ids_gap",
    ]
    assert keys.index("reasoning") == keys.index("text") - 1


async def test_without_reasoning_records_are_as_before_with_their_gap(
    tokenizer_dir: Path,
    tokenizers: dict[str, Any],
    prompts_dir: Callable[..., Path],
    sim: Any,
    tmp_path: Path,
) -> None:
    server = await sim(profiles={"A": LengthProfile(mean=80)})
    config = _config(tokenizer_dir, prompts_dir(A=6), tmp_path / "out", server.url)
    await run(config)
    tokenizer = tokenizers["plain"]
    for record in read_records(tmp_path / "out" / "A"):
        assert "reasoning" not in record
        assert record["output_ids"] == encode_text(tokenizer, record["text"])
        assert record["ids_gap"] == len(record["output_ids"]) - record["completion_tokens"]
        assert abs(record["ids_gap"]) <= 1  # one token a word, the first maybe two


async def test_sglang_native_records_carry_no_gap_and_no_reasoning(
    tokenizer_dir: Path, prompts_dir: Callable[..., Path], sim: Any, tmp_path: Path
) -> None:
    """The native path's ids are the server's own: no gap to record. A thinking profile on
    the simulator shapes /v1 only."""
    server = await sim(openai_reasoning="reasoning_content", profiles={"A": LengthProfile(mean=50)})
    config = make_config(tokenizer_dir, prompts_dir(A=6), tmp_path / "out", [server.url])
    await run(config)
    records = read_records(tmp_path / "out" / "A")
    assert len(records) == 6
    for record in records:
        assert "ids_gap" not in record and "reasoning" not in record
        assert len(record["output_ids"]) == record["completion_tokens"]


async def test_gen_tui_run_records_the_reasoning(
    monkeypatch: pytest.MonkeyPatch,
    tokenizer_dir: Path,
    tokenizers: dict[str, Any],
    prompts_dir: Callable[..., Path],
    sim: Any,
    tmp_path: Path,
) -> None:
    server = await sim(openai_reasoning="openrouter", api_key="sk-reasoning-test")
    monkeypatch.setitem(ENV, "GEN_TUI_TEST_KEY", "sk-reasoning-test")
    out = tmp_path / "out"
    args = run_args(
        tokenizer_dir,
        prompts_dir(A=5),
        out,
        server.url,
        "--api",
        "openai",
        "--model",
        "sim-model",
        "--api-key-env",
        "GEN_TUI_TEST_KEY",
        "--stream",
    )
    code, _, stderr = await finish(await spawn(*args))
    assert code == 0, stderr
    records = read_records(out / "A")
    assert len(records) == 5
    tokenizer = tokenizers["plain"]
    for record in records:
        assert record["reasoning"] and "ids_gap" in record
        assert tokenizer.decode(record["output_ids"]) == think(record["reasoning"], record["text"])

    # The trainer gets the thinking too: apart in sharegpt, in the trained ids in specforge.
    by_id = {f"A/{record['sample_id']}": record for record in records}
    checked = gen_tui("verify", "--output-dir", str(out))
    assert checked.returncode == 0, checked.stderr.decode()
    shared = gen_tui("export", "--output-dir", str(out), "--format", "sharegpt", "--to", "-")
    assert shared.returncode == 0, shared.stderr.decode()
    rows = [json.loads(line) for line in shared.stdout.splitlines()]
    assert sorted(row["id"] for row in rows) == sorted(by_id), shared.stderr.decode()
    for row in rows:
        answer = row["conversations"][-1]
        record = by_id[row["id"]]
        assert answer["role"] == "assistant"
        assert (answer["content"], answer["reasoning_content"]) == (
            record["text"],
            record["reasoning"],
        )
    pretokenized = gen_tui("export", "--output-dir", str(out), "--format", "specforge", "--to", "-")
    assert pretokenized.returncode == 0, pretokenized.stderr.decode()
    for row in map(json.loads, pretokenized.stdout.splitlines()):
        trained = [i for i, mask in zip(row["input_ids"], row["loss_mask"], strict=True) if mask]
        record = by_id[row["id"]]
        # ... and the template's end-of-turn markup after the answer, as SpecForge masks it.
        thought = think(record["reasoning"], record["text"])
        assert tokenizer.decode(trained) == thought + "<|end|>\n"
