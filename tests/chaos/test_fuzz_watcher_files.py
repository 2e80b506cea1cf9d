"""Fuzz the watcher's reading of a dataset folder others can write (issue 30): its record
file and progress.json fed hypothesis-drawn hostile values (huge numbers, NaN, ±inf,
400-digit integers, no newline, 10 MB lines, terminal escapes), then the line it emits
taken in by the panel's side (`dataset_totals`, `watched_snapshot`) and drawn as a panel's
labels.

Property: no exception escapes the watcher's poll (it would end its stream: every dataset
of the host blind), the line it emits is JSON the client reads, each count it reports is
bounded by the records' own bound, and no figure the panel draws from it is WIDEST
characters or more. Example counts follow --chaos-iterations.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from hypothesis import example, given, note
from hypothesis import strategies as st

from gen_tui.backends import watcher
from gen_tui.backends.hosts.watch import dataset_totals
from gen_tui.backends.hosts.watched import watched_snapshot
from gen_tui.backends.watcher.dataset import DatasetTail
from gen_tui.widgets.dataset_panel import PanelView, rate_label, sample_label, token_label

from .conftest import Examples
from .fuzzing import BIG_LINE, WIDEST, dump, escapes, hostile_numbers, timed


@st.composite
def record_file(draw: st.DrawFn) -> bytes:
    lines = []
    for index in range(draw(st.integers(0, 6))):
        fields = {
            "sample_id": draw(st.one_of(st.just(f"s{index}"), hostile_numbers)),
            "completion_tokens": draw(st.one_of(st.integers(0, 50), hostile_numbers)),
            "finish_reason": draw(st.sampled_from(["stop", "length"])) + draw(escapes),
        }
        lines.append("{" + ",".join(f"{json.dumps(k)}:{dump(v)}" for k, v in fields.items()) + "}")
    data = "\n".join(lines).encode()
    shape = draw(st.sampled_from(["plain", "no-newline", "big", "big-then-more"]))
    if shape == "plain":
        data += b"\n"
    elif shape == "big":
        data += b"\n" + b"7" * BIG_LINE
    elif shape == "big-then-more":
        data += b"\n" + b"7" * BIG_LINE + b'\n{"sample_id":"z","completion_tokens":5}\n'
    return data


@st.composite
def progress_file(draw: st.DrawFn) -> bytes:
    fields = {
        name: draw(st.one_of(st.integers(0, 1000), hostile_numbers))
        for name in ("pid", "tokens", "samples", "max_tokens", "inflight", "errors")
    }
    fields["tok_s"] = draw(st.one_of(st.floats(0, 1e4), hostile_numbers))
    fields["state"] = "active" + draw(escapes)
    text = "{" + ",".join(f"{json.dumps(k)}:{dump(v)}" for k, v in fields.items()) + "}"
    return text.encode()


@given(record_file(), progress_file())
@example(  # a completion count of 400 digits, NaN and 1e308 beside a sane record
    raw=b'{"sample_id":"a","completion_tokens":' + b"9" * 400 + b"}\n"
    b'{"sample_id":"b","completion_tokens":NaN}\n{"sample_id":"c","completion_tokens":1e308}\n'
    b'{"sample_id":"d","completion_tokens":5}\n',
    progress=b'{"pid":1,"tokens":1e308,"samples":NaN,"max_tokens":-1e308,"tok_s":Infinity}',
)
def test_the_watcher_on_hostile_dataset_files(
    examples: Examples, raw: bytes, progress: bytes
) -> None:
    examples()
    note(repr((raw[:400], progress[:400])))
    with tempfile.TemporaryDirectory() as folder:
        dataset = Path(folder) / "A"
        dataset.mkdir()
        (dataset / watcher.RAW_FILE).write_bytes(raw)
        (dataset / watcher.PROGRESS_FILE).write_bytes(progress)
        tail = DatasetTail(folder, "A")
        for _ in range(3):  # a long line may take more than one poll's share
            timed(tail.poll, size=len(raw))
            timed(tail.poll_meta, None, size=len(progress))
        report = tail.report(time.time())
    assert report is not None
    line = json.loads(json.dumps(report, separators=(",", ":")))  # as _emit and the client
    assert 0 <= line["tokens"] <= line["samples"] * watcher.MAX_COMPLETION_TOKENS
    assert line["problem"] is None or len(line["problem"]) < 1000
    totals = dataset_totals(line)
    snapshot = watched_snapshot(totals, None, (0.0, 0.0), (None, None), "box")
    for label in (token_label(snapshot), sample_label(snapshot), rate_label(PanelView(snapshot))):
        assert "\x1b" not in label
        # "1.2k/10M" holds two figures in one word
        assert max((len(word) for word in label.split()), default=0) < 2 * WIDEST, label
