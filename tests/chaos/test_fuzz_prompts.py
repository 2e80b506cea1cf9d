"""Fuzz the prompt parser: a prompt line in any of the three layouts (or none), whole or
damaged, parses as docs/run.md says or is refused with a reason, and a prompt file reports
every line it skips as `file:line: reason`.

Property for each: the real function either returns what an independent oracle
(`oracle.py`) expects, or raises the module's own error type with a message that says where
(file, line, field). Any other exception, or a call that takes seconds, is a defect: it
would reach the user as a traceback or a hang. Example counts follow --chaos-iterations.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gen_tui.backends.store.prompts import Prompt, PromptProblem, iter_prompts, parse_prompt

from .conftest import Examples
from .fuzzing import json_values, mutate, timed
from .oracle import strict_json

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


@st.composite
def prompt_lines(draw: st.DrawFn) -> bytes:
    raw = json.dumps(draw(prompt_objects())).encode()
    return mutate(raw, draw) if draw(st.booleans()) else raw


def expected_messages(obj: Any) -> list[dict[str, str]] | None:
    """The prompt rules of docs/run.md, restated: None when the line must be refused."""
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
