"""The fleet plan in progress.json and on the panel's plan line (issue 34, "on the panel"):
written by the engine, read back bounded (an old file without it still reads; a hostile one
costs the plan alone), said in one line and flagged when it misses its deadline or cap; and
the control file and dialog text that change a run's deadline and cap, checked in one line.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import orjson
import pytest

from gen_tui.backends.plan import Lane, plan
from gen_tui.backends.plan.control import (
    CONTROL_FILE,
    CONTROL_MAX_BYTES,
    ControlError,
    parse_target_text,
    read_target,
    stamped,
    target_text,
    target_words,
)
from gen_tui.backends.progress.plan_view import (
    MAX_LANES,
    LanePlan,
    PlanView,
    lane_split,
    replanned,
)
from gen_tui.backends.progress.snapshot import DatasetSnapshot, DatasetState, RunSnapshot
from gen_tui.backends.store.progress_file import ProgressFile
from gen_tui.widgets.dataset_panel import PanelView, detail_parts
from gen_tui.widgets.plan_line import newest, plan_text

NOW = time.mktime((2026, 12, 5, 6, 0, 0, 0, 0, -1))  # 06:00 local


def at(clock: str) -> float:
    hour, minute = (int(part) for part in clock.split(":"))
    return NOW + (hour - 6) * 3600 + minute * 60


def seed_plan(**changes: object) -> PlanView:
    """The issue's line: box 61M by 07:40 · api 31M $43 · finish 07:28 · $43 of $60."""
    fields: dict[str, object] = {
        "made_at": NOW,
        "status": "meets",
        "lanes": (
            LanePlan("box", 61_000_000, 0.0, at("07:40"), 11_000.0, 0.0, 2.0, "up"),
            LanePlan("api", 31_000_000, 43.0, at("07:12"), 6_000.0, 43 / 31e6, 0.5, "up"),
        ),
        "finish_at": at("07:28"),
        "cost": 43.0,
        "max_cost": 60.0,
        "deadline_at": at("07:30"),
        "note": "deadline met at least cost",
        "remaining": 92_000_000,
        "spent": 0.0,
    }
    fields.update(changes)
    return PlanView(**fields)  # type: ignore[arg-type]


def dataset(**changes: object) -> DatasetSnapshot:
    fields: dict[str, object] = dict(
        name="A", state=DatasetState.ACTIVE, tokens=10, samples=1, max_tokens=100,
        max_samples=None, budget_mode="predictive", inflight=0, errors=0, malformed=0,
        mean_tokens=None, tok_s=0.0, samples_s=0.0, eta_s=None, resumed_tokens=0,
        resumed_samples=0, started_at=NOW, updated_at=NOW, last_record_at=None, pid=42,
        host="box",
    )  # fmt: skip
    fields.update(changes)
    return DatasetSnapshot(**fields)  # type: ignore[arg-type]


def through_file(snap: DatasetSnapshot) -> ProgressFile:
    run = RunSnapshot((snap,), 4, 0, 0.0, 1.0, 1.0, False, False)
    raw = orjson.dumps(ProgressFile.payload(run, snap))
    parsed = ProgressFile.parse(orjson.loads(raw))
    assert parsed is not None
    return parsed


def test_the_plan_line_says_the_issue_example() -> None:
    line = plan_text(seed_plan(), now=NOW)
    assert line == (
        "box 61M by 07:40 · api 31M $43.00 by 07:12 · finish 07:28 · $43.00 of $60.00"
        " · deadline 07:30"
    )
    assert not seed_plan().flagged


def test_a_plan_that_misses_its_deadline_or_passes_its_cap_is_flagged() -> None:
    assert seed_plan(finish_at=at("07:45")).flagged  # past 07:30
    assert seed_plan(status="late").flagged
    assert seed_plan(cost=61.0).flagged  # past $60
    assert seed_plan(status="stalled", finish_at=None).flagged
    assert not seed_plan(deadline_at=None, max_cost=None, finish_at=at("09:00")).flagged
    # "Tomorrow" is said: a run at 23:00 for 07:30 ends the next day.
    assert "finish tomorrow 07:28" in plan_text(seed_plan(finish_at=at("07:28") + 86400), NOW)


def test_the_plan_and_lane_split_reach_progress_json_and_come_back() -> None:
    snap = dataset(plan=seed_plan(), lanes={"box": 7, "api": 3})
    read = through_file(snap)
    assert read.plan == seed_plan()
    assert read.lanes == {"box": 7, "api": 3}
    assert read.ignored == ()
    # Each dataset's split, on its panel (its details' second line).
    _, second = detail_parts(PanelView(dataset(lanes={"box": 7, "api": 30})))
    assert "lanes api 30 · box 7" in second


def test_an_old_progress_file_without_a_plan_still_reads() -> None:
    payload = orjson.loads(orjson.dumps(ProgressFile.payload(
        RunSnapshot((dataset(),), 4, 0, 0.0, 1.0, 1.0, False, False), dataset()
    )))  # fmt: skip
    del payload["plan"], payload["lanes"]
    read = ProgressFile.parse(payload)
    assert read is not None and read.plan is None and read.lanes is None
    assert read.state is DatasetState.ACTIVE and read.ignored == ()
    # And a plan of an older shape (no rates): read, shown, but no preview from it.
    old = seed_plan().to_json()
    for lane in old["lanes"]:
        for key in ("rate", "price", "turnaround_s", "state"):
            del lane[key]
    del old["remaining"], old["spent"]
    view = PlanView.from_json(old)
    assert view is not None and plan_text(view, NOW) == plan_text(seed_plan(), NOW)
    assert replanned(view, 3600.0, 60.0, NOW) is None


def test_a_hostile_plan_costs_the_plan_alone_and_is_bounded() -> None:
    good = seed_plan().to_json()
    for bad in ("a plan", [1, 2], {"made_at": 1e300, "lanes": good["lanes"]}, {"lanes": []}):
        payload = {"state": "active", "plan": bad, "errors": 3}
        read = ProgressFile.parse(payload)
        assert read is not None and read.plan is None and "plan" in read.ignored
        assert read.errors == 3  # the rest of the file still reads
    many = dict(good, lanes=[dict(good["lanes"][0], name=f"l{i}") for i in range(10_000)])
    view = PlanView.from_json(many)
    assert view is not None and len(view.lanes) == MAX_LANES
    odd = dict(
        good,
        status="\x1b[31mpwned",
        note="\x1b]0;title\x07" + "n" * 10_000,
        lanes=[
            dict(good["lanes"][0], name="[b]box[/b]\x1b[2J\n", tokens=float("inf")),
            dict(good["lanes"][1], name="x" * 500, cost=-5, finish_at="07:00", state="??"),
            {"name": 3, "tokens": 5},
            "not a lane",
        ],
    )
    view = PlanView.from_json(odd)
    assert view is not None
    (lane,) = view.lanes  # the first has no count in range; the last two no shape
    assert len(lane.name) == 41 and lane.cost == 0.0 and lane.finish_at is None
    assert lane.state == "down"  # unknown: planned at nothing by a preview
    assert view.status == "late" and view.flagged  # unknown: flagged, not vouched for
    assert "\x1b" not in view.note and len(view.note) < 300
    assert lane_split({"box": 5, "api": -1, "x": "7", 3: 4}) == {"box": 5}
    assert lane_split([1]) is None


def test_the_panel_shows_the_newest_plan_of_each_run_and_counts_the_others() -> None:
    older, newer = seed_plan(made_at=NOW - 60), seed_plan(made_at=NOW)
    assert newest([(("box", 1), older), (("box", 1), newer), (("box", 1), None)]) == (newer, 0)
    other = seed_plan(made_at=NOW - 5)
    assert newest([(("box", 1), newer), (("gpu", 7), other)]) == (newer, 1)
    assert newest([(("box", 1), None)]) is None


def test_the_preview_replans_from_the_rates_the_plan_was_made_with() -> None:
    view = seed_plan(spent=10.0)
    lanes = [Lane("box", 11_000.0, 0.0, 2.0), Lane("api", 6_000.0, 43 / 31e6, 0.5)]
    for deadline_s, cap in ((3600.0, 60.0), (8 * 3600.0, None), (None, 5.0)):
        shown = replanned(view, deadline_s, cap, NOW)
        left = None if cap is None else max(0.0, cap - 10.0)  # what is left of the cap
        expected = plan(lanes, view.remaining, deadline_s, left)
        assert shown is not None
        assert {lane.name: lane.tokens for lane in shown.lanes} == expected.tokens
        assert shown.cost == pytest.approx(10.0 + expected.cost)
        assert shown.max_cost == cap
    tight = replanned(view, 600.0, 20.0, NOW)
    assert tight is not None and tight.flagged and "the best finish is" in tight.note


def test_the_dialog_line_is_a_deadline_and_a_cap_checked_in_one_line() -> None:
    assert parse_target_text("07:30 60") == ("07:30", 60.0)
    assert parse_target_text("  8h  $45.5 ") == ("8h", 45.5)
    assert parse_target_text("none none") == (None, None)
    assert parse_target_text("2h30m none") == ("2h30m", None)
    for text, said in (
        ("07:30", "type a deadline and a cap"),
        ("25:00 60", "no such time of day"),
        ("soon 60", "expected a time of day"),
        ("8h lots", "cap 'lots': expected dollars"),
        ("8h -5", "expected dollars from 0"),
        ("8h nan", "expected dollars from 0"),
        ("1234567890123456789h 5", "more than 16 characters"),
    ):
        with pytest.raises(ControlError, match=said) as caught:
            parse_target_text(text)
        assert "\n" not in str(caught.value)
    assert parse_target_text(target_words("07:30", 60.0)) == ("07:30", 60.0)
    assert parse_target_text(target_words(None, None)) == (None, None)


def test_a_control_file_is_read_bounded_and_checked(tmp_path: Path) -> None:
    path = tmp_path / CONTROL_FILE
    assert read_target(path) is None  # none yet
    target = stamped("8h", 45.0)
    path.write_text(target_text(target))
    assert read_target(path) == target
    for content, said in (
        ('{"deadline": "8h", "max_cost": 5}', "written_at"),
        ('{"deadline": 7, "max_cost": 5, "written_at": 1}', "deadline: expected text"),
        ('{"deadline": "later", "max_cost": 5, "written_at": 1}', "expected a time of day"),
        ('{"deadline": "8h", "max_cost": 1e99, "written_at": 1}', "expected dollars"),
        ("[1]", "holds no JSON object"),
        ("{not json", "not valid JSON"),
        (" " * (CONTROL_MAX_BYTES + 1) + "{}", "is over 1,024 bytes"),
    ):
        path.write_text(content)
        with pytest.raises(ControlError, match=said):
            read_target(path)
    path.unlink()
    os.mkfifo(path)  # never opened blocking: refused as no regular file
    with pytest.raises(ControlError):
        read_target(path)
