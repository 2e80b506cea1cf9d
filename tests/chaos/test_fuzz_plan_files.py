"""Fuzz the fleet plan's two files from others (issue 34): a progress.json's `plan` and
`lanes` (another run's, another version's, an attacker's, read by every panel watching the
folder) and the plan control file (whoever can write the run's folder). Hostile numbers,
JSON of every shape, terminal escapes and byte damage.

Property: progress.json always reads (the plan alone is dropped, the rest stays) and a plan
read is drawn as one bounded line with no escape; a control file is applied as checked or
refused with one ControlError line, never another exception; each in time.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, note
from hypothesis import strategies as st

from gen_tui.backends.plan.control import CONTROL_FILE, ControlError, read_target
from gen_tui.backends.progress.plan_view import MAX_LANES
from gen_tui.backends.progress.snapshot import DatasetSnapshot, DatasetState
from gen_tui.widgets.format import lanes_text
from gen_tui.widgets.plan_line import plan_text

from .conftest import Examples
from .fuzzing import (
    dump,
    escapes,
    hostile_numbers,
    json_values,
    mutate,
    progress_around,
    progress_read,
    timed,
)

LINE_CHARS = 2_000
"""No plan line drawn is this long (MAX_LANES lanes of 40-character names and figures)."""

numbers = st.one_of(hostile_numbers, st.integers(0, 10**9), st.floats(0, 1e10))


@st.composite
def lanes(draw: st.DrawFn) -> Any:
    return [
        {
            "name": draw(st.text(max_size=60)) + draw(escapes)
            if draw(st.booleans())
            else draw(json_values),
            "tokens": draw(numbers),
            "cost": draw(numbers),
            "finish_at": draw(numbers),
            "rate": draw(numbers),
            "price": draw(numbers),
            "turnaround_s": draw(numbers),
            "state": draw(st.one_of(st.sampled_from(["up", "down", "??"]), json_values)),
        }
        for _ in range(draw(st.integers(0, 3)))
    ] + [{"name": "x", "tokens": 1}] * draw(st.sampled_from([0, 0, MAX_LANES * 50]))


@st.composite
def plans(draw: st.DrawFn) -> str:
    """A progress.json's text with a drawn `plan` and `lanes` (NaN and Infinity as JSON's
    other writers spell them)."""
    plan = {
        "made_at": draw(numbers),
        "status": draw(st.one_of(st.sampled_from(["meets", "late", "x\x1b[2J"]), json_values)),
        "lanes": draw(st.one_of(lanes(), json_values)),
        "finish_at": draw(numbers),
        "cost": draw(numbers),
        "max_cost": draw(numbers),
        "deadline_at": draw(numbers),
        "note": draw(st.text(max_size=300)) + draw(escapes),
        "remaining": draw(numbers),
        "spent": draw(numbers),
    }
    split = draw(st.one_of(st.dictionaries(st.text(max_size=50), numbers, max_size=5), json_values))
    shown = draw(st.one_of(st.just(plan), json_values))
    return progress_around(f'"plan": {dump(shown)}, "lanes": {dump(split)}')


@given(plans())
def test_a_hostile_plan_in_progress_json_reads_bounded(examples: Examples, text: str) -> None:
    examples()
    note(text[:500])
    progress = progress_read(text)
    if progress is not None and progress.plan is not None:
        line = timed(plan_text, progress.plan)
        assert "\n" not in line and "\x1b" not in line and len(line) < LINE_CHARS, line
        assert len(progress.plan.lanes) <= MAX_LANES
    if progress.lanes:
        snap = DatasetSnapshot(
            "A", DatasetState.ACTIVE, 0, 0, None, None, "predictive", 0, 0, 0, None, 0.0, 0.0,
            None, 0, 0, 0.0, 0.0, None, 1, "h", lanes=progress.lanes,
        )  # fmt: skip
        line = lanes_text(snap)
        assert "\n" not in line and "\x1b" not in line and len(line) < LINE_CHARS


@st.composite
def control_files(draw: st.DrawFn) -> bytes:
    fields: dict[str, Any] = {}
    for name in ("deadline", "max_cost", "written_at"):
        if draw(st.booleans()):
            fields[name] = draw(
                st.one_of(
                    st.sampled_from(["07:30", "8h", "none", "25:99", "1e400h", "90m\x1b[2J"]),
                    numbers,
                    json_values,
                )
            )
    data = dump(draw(st.one_of(st.just(fields), json_values))).encode()
    return mutate(data, draw) if draw(st.booleans()) else data


@given(control_files())
def test_a_hostile_control_file_is_applied_checked_or_refused_in_one_line(
    examples: Examples, data: bytes
) -> None:
    examples()
    note(repr(data[:300]))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / CONTROL_FILE
        path.write_bytes(data)
        try:
            target = timed(read_target, path)
        except ControlError as exc:
            said = str(exc)
            assert said and "\n" not in said and len(said) < 300, said
            return
    assert target is not None
    assert target.max_cost is None or 0 <= target.max_cost <= 1e9
    assert target.deadline is None or len(target.deadline) <= 16
    assert 0 <= target.written_at < 1e10
