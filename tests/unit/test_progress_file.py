"""progress.json: the one writer keeps today's bytes; the one reader never raises."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from gen_tui.backends.progress.snapshot import DatasetSnapshot, DatasetState, RunSnapshot
from gen_tui.backends.store.progress_file import PoolFigures, ProgressFile, ServerReport


def snapshot(name: str = "B1", **changes: Any) -> DatasetSnapshot:
    fields: dict[str, Any] = dict(
        name=name, state=DatasetState.ACTIVE, tokens=1200, samples=7, max_tokens=5000,
        max_samples=None, budget_mode="strict", inflight=3, errors=1, malformed=0,
        mean_tokens=171.4, tok_s=55.5, samples_s=0.3, eta_s=68.0, resumed_tokens=0,
        resumed_samples=0, started_at=1.0, updated_at=2.0, last_record_at=None, pid=4242,
        host="box", message="ok", cost=0.25,
    )  # fmt: skip
    fields.update(changes)
    return DatasetSnapshot(**fields)


def run(*datasets: DatasetSnapshot) -> RunSnapshot:
    return RunSnapshot(
        datasets=datasets,
        concurrency=8,
        inflight=3,
        utilisation=0.5,
        elapsed_s=10.0,
        active_s=9.0,
        stopping=False,
        paused=False,
        servers={"http://a": "ok"},
        max_total_tokens=9000,
    )


def test_the_writer_writes_the_snapshot_the_servers_and_the_pool(tmp_path: Path) -> None:
    ds = snapshot()
    whole = run(ds, snapshot("B2", state=DatasetState.WAITING))
    path = tmp_path / "progress.json"
    ProgressFile.write(path, whole, ds)
    expected = {**ds.to_json(), "servers": whole.servers_json(), "pool": whole.pool_json()}
    assert path.read_bytes() == orjson.dumps(expected, option=orjson.OPT_INDENT_2)
    assert [p.name for p in tmp_path.iterdir()] == ["progress.json"]  # no temporary left


def test_the_reader_gets_back_what_the_writer_wrote(tmp_path: Path) -> None:
    ds = snapshot()
    path = tmp_path / "progress.json"
    ProgressFile.write(path, run(ds), ds)
    read = ProgressFile.read(path)
    assert read == ProgressFile(
        pid=4242,
        state=DatasetState.ACTIVE,
        max_tokens=5000,
        max_samples=None,
        budget_mode="strict",
        inflight=3,
        errors=1,
        message="ok",
        cost=0.25,
        truncated=0,
        truncated_of=0,
        truncated_warn=5.0,
        batches=(),  # none in flight (a run that is no batch run writes the empty list)
        servers={"http://a": ServerReport("ok")},
        pool=PoolFigures(inflight=3, concurrency=8),
    )


@pytest.mark.parametrize(
    ("pool", "expected", "ignored"),
    [
        (None, None, ()),  # a writer that predates the field: still read, no figure
        ({"inflight": 5, "concurrency": 64, "states": {}}, PoolFigures(5, 64), ()),
        ({"inflight": 5}, None, ("pool",)),  # both or neither
        ({"inflight": True, "concurrency": 64}, None, ("pool",)),
        ({"inflight": 1e300, "concurrency": 64}, None, ("pool",)),
        ({"inflight": -1, "concurrency": 64}, None, ("pool",)),
        ("64/64", None, ("pool",)),
    ],
)
def test_the_pool_is_read_when_whole_and_in_range_and_an_older_file_still_reads(
    pool: object, expected: PoolFigures | None, ignored: tuple[str, ...]
) -> None:
    value: dict[str, object] = {"pid": 42, "inflight": 2}
    if pool is not None:
        value["pool"] = pool
    read = ProgressFile.parse(value)
    assert read is not None
    assert (read.pool, read.ignored, read.inflight) == (expected, ignored, 2)


@pytest.mark.parametrize(
    "content", [b"", b"{", b"[1, 2]", b"null", b'"text"', b"\xff\xfe", b"{" * 10_000]
)
def test_the_reader_never_raises_on_a_file_that_is_no_object(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "progress.json"
    path.write_bytes(content)
    assert ProgressFile.read(path) is None
    assert ProgressFile.read(tmp_path / "absent.json") is None


def test_a_field_of_a_wrong_type_costs_that_field_alone() -> None:
    read = ProgressFile.parse(
        {"pid": "12", "state": "done", "max_tokens": True, "inflight": 2, "cost": "x",
         "message": ["no"], "errors": 1.5, "budget_mode": "drain"}
    )  # fmt: skip
    assert read is not None
    assert (read.pid, read.max_tokens, read.cost, read.message, read.errors) == (None,) * 5
    assert (read.state, read.inflight, read.budget_mode) == (DatasetState.DONE, 2, "drain")
    assert set(read.ignored) == {"pid", "max_tokens", "cost", "message", "errors"}


@pytest.mark.parametrize(("said", "read_as"), [(5.5, 5.5), (3, 3.0), (0.5, None), ("4", None)])
def test_a_turns_mean_below_one_turn_or_of_a_wrong_type_is_ignored(
    said: object, read_as: float | None
) -> None:
    """`turns_mean` (a watched `--turns all` run's ETA multiplies by it): a conversation has
    one turn at least, so a smaller mean is no mean."""
    read = ProgressFile.parse({"turns_mean": said})
    assert read is not None and read.turns_mean == read_as
    assert ("turns_mean" in read.ignored) == (read_as is None)


def test_a_state_of_another_version_is_unknown_not_an_error() -> None:
    read = ProgressFile.parse({"state": "levitating", "pid": 5})
    assert read is not None and read.state is None and read.pid == 5


def test_a_budget_note_reaches_a_watched_panel_cleaned_and_once(tmp_path: Path) -> None:
    """The engine's one note that a budget is small for the pool goes through progress.json
    to a panel watching the dataset from another process (issue 29), as the writer's own
    words: another user's progress.json may hold escapes there, which reach no terminal."""
    from gen_tui.backends.hosts.watch import DatasetTotals
    from gen_tui.backends.hosts.watched import watched_snapshot

    note = "4,000 tokens is about 31 answers; 31 of 128 slots used"
    path = tmp_path / "progress.json"
    ds = snapshot(budget_note=note + "\x1b]52;c;aGk=\x07")
    ProgressFile.write(path, run(ds), ds)
    read = ProgressFile.read(path)
    assert read is not None and read.budget_note == note + "\x1b]52;c;aGk=\x07"
    totals = DatasetTotals(
        "B1", 1200, 7, True, 0, False, None, None, 0, read, True, 2.0
    )  # fmt: skip
    shown = watched_snapshot(totals, None, (0.0, 0.0), (5000, None), "box")
    assert shown.budget_note.startswith(note) and "\x1b" not in shown.budget_note
    ProgressFile.write(path, run(snapshot()), snapshot())
    quiet = ProgressFile.read(path)
    assert quiet is not None and quiet.budget_note is None  # no note: none shown


@pytest.mark.parametrize(("turns_mean", "eta"), [(5.0, 15.0), (None, 16.5)])
def test_a_watched_turns_all_eta_counts_conversations_even_from_an_older_writer(
    turns_mean: float | None, eta: float
) -> None:
    """`--max-samples 10 --turns all`, 4 conversations whole in 22 turn records, 2 answers
    a second: 6 conversations to go at the writer's mean turns (5: 15 s), or, from a writer
    that says no mean, at the records per whole conversation (5.5: 16.5 s); never the 12
    turn records to go (6 s)."""
    from gen_tui.backends.hosts import RunIdentity, RunProcess
    from gen_tui.backends.hosts.watch import DatasetTotals
    from gen_tui.backends.hosts.watched import watched_snapshot

    progress = ProgressFile(pid=77, max_samples=10, conversations=4, turns_mean=turns_mean)
    writer = RunProcess(RunIdentity("box", 77, 1.0, "b", ()), ("C",), "writing", 1.0, "/o", None)
    totals = DatasetTotals("C", 900, 22, True, 0, True, 77, 1.0, 0, progress, True, 2.0)
    shown = watched_snapshot(totals, writer, (80.0, 2.0), (None, None), "box")
    assert shown.eta_s == pytest.approx(eta)
