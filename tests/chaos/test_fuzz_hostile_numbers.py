"""Fuzz the readers of numbers others write (issue 30): the report (records, history),
verify, a server's /metrics and nvidia-smi's answer, fed hypothesis-drawn hostile values:
huge numbers, NaN, ±inf, 400-digit integers, no newline, 10 MB lines, terminal escapes.

Property for each: no exception escapes (it would reach the user as a traceback), each call
comes in time (`timed`), and every figure drawn is bounded: no word of a table cell, a
server line or a GPU line is WIDEST characters or more, and every line said is one bounded
line. Example counts follow --chaos-iterations.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import example, given, note
from hypothesis import strategies as st

from gen_tui.backends import watcher
from gen_tui.backends.export.verify import verify_dataset
from gen_tui.backends.report.html import render
from gen_tui.backends.report.summary import summarize
from gen_tui.backends.report.table import cells
from gen_tui.backends.telemetry.gpus import parse_gpus
from gen_tui.backends.telemetry.metrics import MetricsError, MetricsReader
from gen_tui.widgets.format import server_text
from gen_tui.widgets.gpu_strip import GpuLine, compact_line, tall_line

from .conftest import Examples
from .fuzzing import BIG_LINE, WIDEST, dump, escapes, hostile_numbers, number_texts, timed


def widest_word(text: str) -> int:
    return max((len(word) for word in text.split()), default=0)


@st.composite
def records(draw: st.DrawFn) -> bytes:
    lines = []
    for index in range(draw(st.integers(0, 5))):
        fields = {
            "sample_id": f"s{index}{draw(escapes)}",
            "completion_tokens": draw(st.one_of(st.integers(0, 50), hostile_numbers)),
            "prompt_tokens": 3,
            "finish_reason": "stop",
            "output_ids": [],
        }
        for name in ("created", "latency_s", "cost"):
            if draw(st.booleans()):
                fields[name] = draw(hostile_numbers)
        lines.append("{" + ",".join(f"{json.dumps(k)}:{dump(v)}" for k, v in fields.items()) + "}")
    data = "\n".join(lines).encode()
    if draw(st.booleans()):
        data += b"\n"
    return data


@st.composite
def history(draw: st.DrawFn) -> bytes:
    lines = []
    for _ in range(draw(st.integers(0, 5))):
        point = {
            "t": draw(st.one_of(st.floats(1.6e9, 1.8e9), hostile_numbers)),
            "pid": draw(st.one_of(st.just(7), hostile_numbers)),
            "state": "active" + draw(escapes),
            "tokens": draw(st.one_of(st.integers(0, 10**6), hostile_numbers)),
            "samples": draw(st.one_of(st.integers(0, 10**3), hostile_numbers)),
            "tok_s": draw(st.one_of(st.floats(0, 1e4), hostile_numbers)),
            "inflight": 1,
            "errors": 0,
            "cost": draw(st.one_of(st.floats(0, 10), hostile_numbers)),
        }
        lines.append("{" + ",".join(f"{json.dumps(k)}:{dump(v)}" for k, v in point.items()) + "}")
    return "\n".join(lines).encode() + draw(st.sampled_from([b"", b"\n"]))


@given(records(), history(), st.booleans())
@example(  # the issue's own: created ±1e308, a history point at t 1e308
    raw=b'{"sample_id":"a","completion_tokens":5,"created":1e308,"latency_s":1e308}\n'
    b'{"sample_id":"b","completion_tokens":5,"created":-1e308,"cost":1e308}\n',
    points=b'{"t":1.7e9,"pid":1,"state":"active","tokens":1,"samples":1,"tok_s":1,'
    b'"inflight":0,"errors":0}\n{"t":1e308,"pid":1,"state":"active","tokens":2,'
    b'"samples":2,"tok_s":1,"inflight":0,"errors":0}\n',
    big=False,
)
def test_report_and_verify_of_hostile_numbers(
    examples: Examples, raw: bytes, points: bytes, big: bool
) -> None:
    examples()
    note(repr((raw[:500], points[:500], big)))
    with tempfile.TemporaryDirectory() as folder:
        dataset = Path(folder) / "A"
        dataset.mkdir()
        (dataset / watcher.RAW_FILE).write_bytes(raw + (b"7" * BIG_LINE if big else b""))
        (dataset / watcher.HISTORY_FILE).write_bytes(points)
        report = timed(summarize, dataset)
        row = cells(report)
        assert max(widest_word(cell) for cell in row[1:]) < WIDEST, row
        assert all(len(line) < 400 and "\n" not in line for line in report.problems)
        page = timed(render, [report], folder, 1.7e9)
        assert widest_word(page.replace("<", " <").replace(">", "> ")) < 300
        verdict = timed(verify_dataset, dataset, {})
        assert all(len(line) < 600 and "\x1b" not in line for line in verdict.first)
        assert len(verdict.line()) < 400


SGLANG_NAMES = [
    "sglang:num_running_reqs",
    "sglang:num_queue_reqs",
    "sglang:token_usage",
    "sglang:gen_throughput",
    "sglang:num_retracted_requests_total",
    "sglang:generation_tokens_total",
    "vllm:num_requests_running",
    "vllm:kv_cache_usage_perc",
    "vllm:generation_tokens_total",
]


@st.composite
def metrics_texts(draw: st.DrawFn) -> str:
    lines = []
    for _ in range(draw(st.integers(0, 8))):
        name = draw(st.sampled_from(SGLANG_NAMES))
        label = draw(st.sampled_from(["", '{tp_rank="0"}', '{tp_rank="1"}', '{a="\\x1b[2J"}']))
        lines.append(f"{name}{label} {draw(number_texts)}{draw(escapes)}")
    text = "\n".join(lines)
    shape = draw(st.sampled_from(["plain", "no-newline", "big", "crlf"]))
    if shape == "plain":
        text += "\n"
    elif shape == "big":
        text += "\nsglang:num_running_reqs " + "9" * BIG_LINE
    elif shape == "crlf":
        text = text.replace("\n", "\r\n")
    return text


@given(st.lists(metrics_texts(), min_size=1, max_size=3))
@example(texts=["sglang:num_running_reqs 1e308\nsglang:gen_throughput NaN\n"])
@example(texts=["sglang:num_running_reqs " + "9" * 400 + "\n"])
def test_metrics_of_hostile_servers_draw_bounded_figures(
    examples: Examples, texts: list[str]
) -> None:
    examples()
    note(repr([text[:300] for text in texts]))
    reader = MetricsReader()
    for at, text in enumerate(texts):
        try:
            metrics = timed(reader.read, text, 1000.0 + at * 1e-9)
        except MetricsError as exc:
            assert len(str(exc)) < 300 and "\n" not in str(exc)
            continue
        for detail in (False, True):
            line = server_text("http://gpu:30000", "ok", metrics, detail=detail)
            assert widest_word(line) < WIDEST and len(line) < 120, line


@st.composite
def nvidia_smi_answers(draw: st.DrawFn) -> str:
    rows = []
    for _ in range(draw(st.integers(0, 6))):
        fields = [draw(number_texts), f"H100{draw(escapes)}"]
        fields += [draw(st.one_of(number_texts, st.just("[N/A]"))) for _ in range(5)]
        rows.append(", ".join(fields))
    text = "\n".join(rows)
    if draw(st.booleans()):
        text += "," * draw(st.integers(0, 3)) + "9" * draw(st.sampled_from([0, 400, BIG_LINE]))
    return text


@given(nvidia_smi_answers())
@example(answer="1e308, H100, 1e308, 1e308, 1e308, 1e308, 1e308\n0, H100, 1, 1e308, 1, 1e308, 1")
def test_nvidia_smi_of_hostile_numbers_draws_bounded_figures(
    examples: Examples, answer: str
) -> None:
    examples()
    note(repr(answer[:500]))
    rows = timed(watcher.gpu_rows, answer)
    gpus = parse_gpus(json.loads(json.dumps(rows)))  # as the line crosses to the client
    lines = tuple(GpuLine("box", gpu, (0.5,)) for gpu in gpus)
    for text in (*map(tall_line, lines), compact_line(lines, 200)):
        # "73.6/79.6G" holds two figures in one word, "GPU1023" a prefix.
        assert widest_word(text) < WIDEST + 8 and "\x1b" not in text, text
