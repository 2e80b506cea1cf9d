"""Fuzz every parser of human- or crash-made input: a correct result or one clear error.

Property for each: the real function either returns what an independent oracle
(`oracle.py`) expects, or raises the module's own error type with a message that says where
(file, line, field). Any other exception, or a call that takes seconds, is a defect: it
would reach the user as a traceback or a hang. Example counts follow --chaos-iterations.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, note
from hypothesis import strategies as st

from gen_tui.backends import watcher
from gen_tui.backends.config import ConfigError, load_config
from gen_tui.backends.counts import CountError, parse_count
from gen_tui.backends.prompts import (
    DatasetNameError,
    Prompt,
    PromptProblem,
    check_dataset_name,
    iter_prompts,
    parse_prompt,
)
from gen_tui.backends.records import RecordFileError, scan_records

from .conftest import Examples
from .oracle import ScanExpectation, dataset_name_ok, line_record, strict_json

SLOW_S = 1.0  # any single parse slower than this is a hang waiting for a bigger input

# ---- shared strategies ------------------------------------------------------------------

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),  # wider is a JSON library's range, not our rules
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
roles = st.sampled_from(
    ["user", "assistant", "system", "human", "gpt", "USER", "tool", "model", "bot", "", 3]
)
texts = st.one_of(st.text(max_size=30), st.none(), st.integers())


@st.composite
def prompt_objects(draw: st.DrawFn) -> dict[str, Any]:
    """Prompt lines in the three layouts, most of them plausible, some broken in one field."""
    layout = draw(st.sampled_from(["messages", "conversations", "prompt", "other"]))
    obj: dict[str, Any] = {}
    if layout == "messages":
        obj["messages"] = draw(
            st.lists(st.fixed_dictionaries({"role": roles, "content": texts}), max_size=4)
        )
    elif layout == "conversations":
        obj["conversations"] = draw(
            st.lists(st.fixed_dictionaries({"from": roles, "value": texts}), max_size=4)
        )
    elif layout == "prompt":
        obj["prompt"] = draw(st.one_of(st.text(max_size=20), json_values))
        if draw(st.booleans()):
            obj["system"] = draw(st.one_of(st.text(max_size=10), json_values))
    else:
        obj = draw(st.dictionaries(st.text(max_size=8), json_values, max_size=4))
    if draw(st.booleans()):
        obj[draw(st.sampled_from(["id", "sample_id"]))] = draw(
            st.one_of(st.integers(-5, 10**6), st.text(max_size=8), st.none(), json_values)
        )
    return obj


def mutate(data: bytes, draw: st.DrawFn) -> bytes:
    """Cut, splice or overwrite a few bytes, as a bad copy or a crash would."""
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(["cut", "insert", "flip", "delete"]))
        at = draw(st.integers(0, len(data)))
        if op == "cut":
            data = data[:at]
        elif op == "insert":
            data = data[:at] + draw(st.binary(min_size=1, max_size=6)) + data[at:]
        elif op == "flip" and at < len(data):
            data = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1 :]
        elif op == "delete":
            data = data[:at] + data[at + draw(st.integers(1, 8)) :]
    return data


@st.composite
def prompt_lines(draw: st.DrawFn) -> bytes:
    raw = json.dumps(draw(prompt_objects())).encode()
    return mutate(raw, draw) if draw(st.booleans()) else raw


def timed(call: Any, *args: Any, **kwargs: Any) -> Any:
    """`call(...)`'s result or exception, after checking it came in time either way (the
    check is not in a `finally`, where it would hide the call's own exception)."""
    started = time.perf_counter()
    failure: Exception | None = None
    try:
        result = call(*args, **kwargs)
    except Exception as exc:  # judged by the caller, once the time is checked
        failure = exc
    elapsed = time.perf_counter() - started
    assert elapsed < SLOW_S, f"{call.__name__} took {elapsed:.2f} s on {args!r:.200}"
    if failure is not None:
        raise failure
    return result


# ---- prompt lines -----------------------------------------------------------------------


def expected_messages(obj: Any) -> list[dict[str, str]] | None:
    """The README's prompt rules, restated: None when the line must be refused."""
    mapping = {
        "system": "system",
        "human": "user",
        "user": "user",
        "gpt": "assistant",
        "assistant": "assistant",
        "model": "assistant",
        "chatgpt": "assistant",
        "bing": "assistant",
        "tool": "tool",
        "function_response": "tool",
    }
    if not isinstance(obj, dict):
        return None
    for field, role_key, text_key in (
        ("messages", "role", "content"),
        ("conversations", "from", "value"),
    ):
        if field in obj:
            turns = obj[field]
            if not isinstance(turns, list) or not turns:
                return None
            out = []
            for turn in turns:
                if not isinstance(turn, dict):
                    return None
                role, text = turn.get(role_key), turn.get(text_key)
                if not isinstance(role, str) or role.lower() not in mapping:
                    return None
                if not isinstance(text, str):
                    return None
                out.append({"role": mapping[role.lower()], "content": text})
            while out and out[-1]["role"] == "assistant":
                out.pop()
            return out or None
    if "prompt" in obj:
        prompt = obj["prompt"]
        if not isinstance(prompt, str) or not prompt.strip():
            return None
        system = obj.get("system")
        head = [{"role": "system", "content": system}] if isinstance(system, str) and system else []
        return [*head, {"role": "user", "content": prompt}]
    return None


@given(prompt_lines(), st.integers(1, 10**6))
def test_prompt_line_parses_as_documented_or_says_why(
    examples: Examples, raw: bytes, line: int
) -> None:
    examples()
    ok, obj = strict_json(raw)
    try:
        prompt = timed(parse_prompt, raw, line)
    except ValueError as exc:
        assert str(exc), "an empty reason"
        if ok:
            wanted = expected_messages(obj)
            sample_id = obj.get("id", obj.get("sample_id")) if isinstance(obj, dict) else None
            good_id = sample_id is None or (
                isinstance(sample_id, str | int) and not isinstance(sample_id, bool)
            )
            assert wanted is None or not good_id, f"refused a good line: {exc}"
        return
    assert isinstance(prompt, Prompt)
    assert ok, f"accepted a line that is not strict JSON: {raw!r}"
    assert prompt.messages == expected_messages(obj)
    given_id = obj.get("id", obj.get("sample_id"))
    assert prompt.sample_id == (line if given_id is None else given_id)
    assert prompt.line == line


@given(st.lists(st.one_of(prompt_lines(), st.sampled_from([b"", b"  ", b"\t"])), max_size=12))
def test_prompt_file_reports_every_line_it_skips(examples: Examples, lines: list[bytes]) -> None:
    """No silent skip: each non-blank line is a prompt or a `file:line: reason` problem."""
    examples()
    lines = [line.replace(b"\n", b" ") for line in lines]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "A.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
        items = timed(lambda: list(iter_prompts(path)))
    seen_lines = []
    for item in items:
        if isinstance(item, PromptProblem):
            assert str(item).startswith(f"{path}:{item.line}: ") and item.reason
        seen_lines.append(item.line)
    wanted = [number for number, line in enumerate(lines, start=1) if line.strip()]
    assert seen_lines == wanted


# ---- dataset names ----------------------------------------------------------------------

hostile_names = st.one_of(
    st.text(max_size=140),
    st.text(alphabet="AB1._-\n\r\t $;|&`'\"\\/()<>*?~#!{}\x00\u200b\u202e\uff21é", max_size=12),
    st.sampled_from(
        ["..", ".", "B1\n", "B1\n\n", "B1\r", "-rf", "a/../b", "$(id)", "`id`", "a;b", "B1 ", ""]
    ),
    st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z"),
)


@given(hostile_names)
def test_dataset_names_are_exactly_the_safe_ones(examples: Examples, name: str) -> None:
    examples()
    accepted = True
    try:
        check_dataset_name(name)
    except DatasetNameError as exc:
        accepted = False
        assert repr(name) in str(exc)
    assert accepted == dataset_name_ok(name), f"{name!r}: accepted={accepted}"
    # The remote watcher checks names again on the GPU box, by the same rule.
    try:
        watcher.parse_dataset_arg("/tmp", name)
        remote = True
    except ValueError:
        remote = False
    assert remote == dataset_name_ok(name), f"watcher: {name!r}: accepted={remote}"


# ---- budget strings ---------------------------------------------------------------------

count_texts = st.one_of(
    st.text(max_size=16),
    st.from_regex(r"\A\s?[0-9_]{1,8}(\.[0-9_]{0,4})?([eE][+-]?[0-9]{1,7})?\s?[kKmMgGbBtTxX]?\Z"),
    st.sampled_from(
        [
            *("10M", "2.5e6", "500k", "10_000_000", "1e999999", "1e1000000", "9" * 5000),
            *("0e40", "1.000000000000000000000000000001k", "1e18", "1000000000000000001"),
            "2.5e-3k",
        ]
    ),
)


def expected_count(text: str) -> int | None:
    """README: `10M`, `2.5e6`, `500k`, `10_000_000`; a whole, non-negative, sane number.

    Exact arithmetic (Fraction), so a rounding shortcut in the parser would show.
    """
    match = re.fullmatch(
        r"\s*([0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE]([+-]?[0-9]+))?\s*([kKmMgGbBtT]?)\s*", text
    )
    if not match or "__" in match.group(1):
        return None
    whole, _, fraction = match.group(1).replace("_", "").partition(".")
    digits = (whole + fraction).lstrip("0")
    exponent = int(match.group(2) or 0) - len(fraction)
    scale = {"": 0, "k": 3, "m": 6, "g": 9, "b": 9, "t": 12}[match.group(3).lower()]
    if not digits:
        return 0
    if len(digits) + exponent + scale > 19:
        return None  # past 1e18, however it is written: refused, never computed
    value = Fraction(int(digits)) * Fraction(10) ** (exponent + scale)
    if value.denominator != 1 or value > 10**18:
        return None
    return int(value)


@given(count_texts)
def test_budget_strings_parse_or_say_why(examples: Examples, text: str) -> None:
    examples()
    try:
        value = timed(parse_count, text, what="--token-budget")
    except CountError as exc:
        assert str(exc).startswith("--token-budget: ")
        assert expected_count(text) is None, f"{text!r} refused: {exc}"
        return
    assert value == expected_count(text), text


# ---- config TOML ------------------------------------------------------------------------


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value) if not isinstance(value, float) or value == value else "nan"
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string (\uXXXX escapes)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    raise TypeError(value)


config_values = st.one_of(
    st.integers(-5, 10**7),
    st.floats(-1, 1e6, allow_nan=False),
    st.booleans(),
    st.sampled_from(["10M", "2.5e6", "x", "", "predictive", "strict", "sglang", "a\x00b", "~"]),
    st.text(max_size=10),
    st.lists(st.one_of(st.integers(0, 9), st.text(max_size=5)), max_size=3),
)
run_keys = st.sampled_from(
    [
        "server_urls", "tokenizer", "output_dir", "prompts_dir", "concurrency", "budget_mode",
        "max_tokens_per_dataset", "max_samples", "max_total_tokens", "parallel_datasets", "api",
        "price_per_million", "max_cost", "stream", "grace", "max_retries", "bogus",
    ]
)  # fmt: skip


@st.composite
def config_docs(draw: st.DrawFn) -> str:
    lines = ["[run]"]
    for key, value in draw(st.dictionaries(run_keys, config_values, max_size=5)).items():
        lines.append(f"{key} = {toml_value(value)}")
    lines.append("[sampling]")
    sampling_keys = st.sampled_from(["max_new_tokens", "temperature", "stop", "top_k", "nope"])
    for key, value in draw(st.dictionaries(sampling_keys, config_values, max_size=3)).items():
        lines.append(f"{key} = {toml_value(value)}")
    for _ in range(draw(st.integers(0, 3))):
        lines.append("[[datasets]]")
        entry = {
            "name": draw(st.one_of(hostile_names, st.sampled_from(["B1", "B2"]))),
            "prompts": draw(st.sampled_from(["p/B1.jsonl", "a\x00b", "~/x", "../../x"])),
        }
        extra_keys = st.sampled_from(["max_tokens", "max_samples", "weight", "oops"])
        entry.update(draw(st.dictionaries(extra_keys, config_values, max_size=2)))
        for key, value in entry.items():
            if draw(st.integers(0, 9)):
                lines.append(f"{key} = {toml_value(value)}")
    if draw(st.booleans()):
        lines.append("[[hosts]]")
        host_name = draw(st.sampled_from(["gpu", "a b", "x"]))
        host_out = draw(st.sampled_from(["/o", "a\x00", "~"]))
        lines.append(f"name = {toml_value(host_name)}")
        lines.append(f"output_dir = {toml_value(host_out)}")
        if draw(st.booleans()):
            lines.append(f"command = {toml_value(draw(config_values))}")
    text = "\n".join(lines) + "\n"
    if draw(st.integers(0, 4)) == 0:
        text = mutate(text.encode(), draw).decode("utf-8", "replace")
    return text


@given(config_docs())
def test_config_loads_or_names_the_file_and_key(examples: Examples, doc: str) -> None:
    examples()
    note(doc)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "gen-tui.toml"
        path.write_text(doc, encoding="utf-8")
        try:
            config = timed(load_config, path)
        except ConfigError as exc:
            assert str(exc).startswith((f"{path}: ", f"cannot read config {path}")), exc
            return
    for entry in config.datasets:
        assert dataset_name_ok(entry.name)
        assert entry.weight > 0
    for key in ("concurrency", "max_tokens_per_dataset", "max_samples", "max_total_tokens"):
        value = config.run.get(key)
        assert value is None or (isinstance(value, int) and value >= 0), (key, value)


# ---- record files -----------------------------------------------------------------------


@st.composite
def record_lines(draw: st.DrawFn, engine_only: bool = False) -> bytes:
    """A record in the engine's layout, the seed's old layout, or something else entirely."""
    kinds = ["new"] if engine_only else ["new", "new", "old", "meta", "json", "garbage"]
    kind = draw(st.sampled_from(kinds))
    sample_id = draw(st.one_of(st.integers(0, 50), st.text('ab1-é"\\', min_size=1, max_size=4)))
    tokens = draw(st.integers(0, 6))
    if kind == "new":
        body = {"sample_id": sample_id, "completion_tokens": tokens, "prompt_tokens": 3}
        body["finish_reason"] = "stop"
        body["output_ids"] = list(range(tokens))
        body["text"] = draw(st.text(max_size=6))
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    if kind == "old":
        usage = {"prompt_tokens": 2, "completion_tokens": tokens}
        return json.dumps({"sample_id": sample_id, "response": "x", "usage": usage}).encode()
    if kind == "meta":
        return json.dumps({"id": sample_id, "meta_info": {"completion_tokens": tokens}}).encode()
    if kind == "json":
        return json.dumps(draw(json_values)).encode()
    return draw(st.binary(max_size=20)).replace(b"\n", b"")


@st.composite
def record_files(draw: st.DrawFn, engine_only: bool = False) -> bytes:
    """Records joined by newlines, then damaged the ways crashes and full disks damage them:
    a torn end, and a write cut short with the next record glued on.

    Not bit flips inside a complete line: both fast scanners read only the head of a line
    in our layout (by design, for speed), so rot in a record's body is not theirs to find.
    Nor a non-record glued after a complete record: no writer makes that, and the record
    before it is whole (the scan counts it; a full parse would refuse the line).
    """
    lines = draw(st.lists(record_lines(engine_only), max_size=8))
    for _ in range(draw(st.integers(0, 2))):
        op = draw(st.sampled_from(["tear-middle", "blank"]))
        if op == "tear-middle" and len(lines) >= 2:
            at = draw(st.integers(0, len(lines) - 2))
            if b'"completion_tokens"' in lines[at + 1]:
                cut = draw(st.integers(0, len(lines[at])))
                lines[at : at + 2] = [lines[at][:cut] + lines[at + 1]]
        elif op == "blank":
            at = draw(st.integers(0, len(lines)))
            lines.insert(at, draw(st.sampled_from([b"", b"  ", b"\r"])))
    data = b"".join(line + b"\n" for line in lines)
    if data and draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]  # a torn end
    return data


@given(record_files())
def test_record_scan_counts_exactly_or_names_the_bad_line(examples: Examples, data: bytes) -> None:
    examples()
    note(repr(data))
    expected = ScanExpectation(data)
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "x").mkdir()
        path = Path(folder) / "x" / "raw_responses.jsonl"
        path.write_bytes(data)
        try:
            scan = timed(scan_records, path)
        except RecordFileError as exc:
            assert expected.error_line is not None, f"refused a readable file: {exc}"
            assert str(exc).startswith(f"{path}:{expected.error_line}: "), exc
            return
        assert expected.error_line is None, "a damaged line in the middle was not reported"
        assert (scan.done, scan.tokens, scan.records) == (
            expected.keys,
            expected.tokens,
            expected.records,
        )
        assert scan.duplicates == expected.duplicates
        assert (scan.valid_bytes, scan.torn_tail) == (expected.valid_bytes, expected.torn_tail)
        tail = watcher.DatasetTail(folder, "x")
        tail.poll()
        if not scan.torn_tail:
            # The remote watcher must count a sound file the same way. (A torn last line
            # glued to a record of another layout can fool its byte scan until the engine
            # quarantines the line; the engine's own records cannot: next test.)
            assert (tail.total_tokens, tail.total_samples) == (scan.tokens, scan.records)


@given(record_files(engine_only=True))
def test_watcher_counts_damaged_engine_files_like_the_engine(
    examples: Examples, data: bytes
) -> None:
    examples()
    expected = ScanExpectation(data)
    assume(expected.error_line is None)
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "x").mkdir()
        path = Path(folder) / "x" / "raw_responses.jsonl"
        path.write_bytes(data)
        scan = scan_records(path)
        tail = watcher.DatasetTail(folder, "x")
        tail.poll()
        assert (scan.tokens, scan.records) == (expected.tokens, expected.records)
        assert (tail.total_tokens, tail.total_samples) == (scan.tokens, scan.records)


@given(record_lines())
def test_watcher_reads_a_line_like_the_engine(examples: Examples, line: bytes) -> None:
    examples()
    assert watcher.record_tokens(line) == (
        None if (found := line_record(line)) is None else found[1]
    )


@given(record_files(engine_only=True), st.lists(st.integers(0, 10**6), max_size=6))
def test_watcher_tail_counts_appends_in_any_pieces_like_a_recount(
    examples: Examples, data: bytes, cuts: list[int]
) -> None:
    """Bytes arriving in arbitrary pieces (a live writer) end at the same totals."""
    examples()
    assume(ScanExpectation(data).error_line is None)
    points = sorted({cut % (len(data) + 1) for cut in cuts} | {len(data)})
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "x").mkdir()
        path = Path(folder) / "x" / "raw_responses.jsonl"
        path.write_bytes(b"")
        tail = watcher.DatasetTail(folder, "x")
        done = 0
        for point in points:
            with open(path, "ab") as handle:
                handle.write(data[done:point])
            done = point
            tail.poll()
        scan = scan_records(path)
        assert (tail.total_tokens, tail.total_samples) == (scan.tokens, scan.records)


@pytest.mark.parametrize("arg", ["A:1:2:3", "A:x:1:1:1", "A:-1:0:0:0", "A\n:0:0:0:0", ""])
def test_watcher_refuses_bad_resume_arguments_with_a_value_error(arg: str) -> None:
    with pytest.raises(ValueError):
        watcher.parse_dataset_arg("/tmp", arg)
