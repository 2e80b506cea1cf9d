"""Fuzz what issue 31's panel fixes read and draw: a progress.json's `pool` (another run's,
another version's, an attacker's), a provider's batch id and status on the hosted path, and
the header fitted to any width; and the watched runs' servers' figures in the header, from
progress.json files of any shape.

Property: progress.json always reads (a bad pool alone is dropped, the rest stays) and a
pool read is two counts in range; a batch shown carries no escape and is bounded; the
header never draws past its width, and the servers' figures are drawn whenever they would
fit beside every other part at its shortest; a watched server's figure is in range or none.
"""

from __future__ import annotations

import json

from hypothesis import given, note
from hypothesis import strategies as st

from gen_tui.app.dashboard.sources import Activity, WatchedFlight
from gen_tui.app.dashboard.summary import header_view
from gen_tui.backends.bounds import COUNT
from gen_tui.backends.clients.batch import batch_state
from gen_tui.backends.progress.batches import ID_CHARS, STATUS_CHARS
from gen_tui.backends.store.progress_file import ProgressFile
from gen_tui.widgets.header import HeaderView, drawn, fit_parts, parts_of

from .conftest import Examples
from .fuzzing import (
    dump,
    escapes,
    hostile_numbers,
    json_values,
    progress_around,
    progress_read,
    timed,
)

numbers = st.one_of(hostile_numbers, st.integers(0, 10**6), st.floats(0, 1e6))


@st.composite
def pools(draw: st.DrawFn) -> str:
    pool = {"inflight": draw(numbers), "concurrency": draw(numbers), "states": draw(json_values)}
    shown = draw(st.one_of(st.just(pool), json_values))
    return progress_around(f'"pool": {dump(shown)}')


@given(pools())
def test_a_hostile_pool_in_progress_json_reads_bounded(examples: Examples, text: str) -> None:
    examples()
    note(text[:500])
    progress = progress_read(text)
    if progress is not None and progress.pool is not None:
        for count in (progress.pool.inflight, progress.pool.concurrency):
            assert isinstance(count, int) and COUNT.check(count) is not None


@given(
    st.text(min_size=1, max_size=12_000).map(lambda t: "batch_" + t),
    st.text(min_size=1, max_size=12_000),
    escapes,
)
def test_a_hostile_batch_id_and_status_are_shown_clean_and_bounded(
    examples: Examples, batch_id: str, status: str, escape: str
) -> None:
    examples()
    raw = batch_state({"id": batch_id + escape, "status": escape + status})
    shown = timed(raw.shown)
    assert raw.id == batch_id + escape  # the lane's copy, to poll and cancel with
    for text, limit in ((shown.id, ID_CHARS), (shown.status, STATUS_CHARS)):
        assert not any(c in text for c in "\x1b\x07\x9b\u202e\n"), text[:200]
        assert len(text) <= limit + 40


@st.composite
def views(draw: st.DrawFn) -> HeaderView:
    inflight = draw(st.integers(0, 10**6))
    return HeaderView(
        state="running",
        tokens=draw(st.integers(0, 10**15)),
        tok_s=draw(st.floats(0, 1e9)),
        done=draw(st.integers(0, 99)),
        total=99,
        inflight=inflight,
        concurrency=draw(st.integers(max(1, inflight), 10**6)),
        utilisation=draw(st.one_of(st.none(), st.floats(0, 1))),
        server_running=draw(st.integers(0, 10**6)),
        server_queued=draw(st.integers(0, 10**6)),
        note=draw(st.text(max_size=80).filter(lambda t: "gpu-box" not in t)),
        where=draw(st.sampled_from(["", "pid 4242 on gpu-box"])),
        cost=draw(st.one_of(st.none(), st.floats(0, 1e6))),
        cost_per_hour=draw(st.one_of(st.none(), st.floats(0, 1e4))),
        hosts=(("gpu-box", "connected"),) if draw(st.booleans()) else (),
    )


@given(views(), st.integers(0, 240))
def test_the_header_fits_and_gives_way_least_important_first(
    examples: Examples, view: HeaderView, room: int
) -> None:
    examples()
    parts = parts_of(view)
    shown = timed(fit_parts, parts, room)
    assert sum(2 + len(part) for part in shown) <= room, (shown, room)
    servers = next((i for i, p in enumerate(parts) if p.text.startswith("(server: ")), None)
    if servers is None or any(p.startswith(("(server: ", "(srv ")) for p in shown):
        return
    # Not drawn: then not even beside every other part at its shortest (the servers' words
    # at theirs) would it fit, drawn as the header draws.
    squeezed = [([form for _, form in p.steps] or [p.text])[-1] for p in parts]
    squeezed[servers] = parts[servers].steps[0][1]
    assert servers not in drawn(squeezed, room), (shown, room)


@st.composite
def watched_files(draw: st.DrawFn) -> list[str]:
    """Up to 4 watched runs' progress.json texts: a pool and servers whose figures are
    another version's, another run's or an attacker's."""
    files = []
    for _ in range(draw(st.integers(1, 4))):
        servers = {
            f"http://s{index}": draw(
                st.one_of(
                    st.fixed_dictionaries(
                        {
                            "state": st.one_of(st.just("ok"), json_values),
                            "metrics": st.fixed_dictionaries(
                                {"running": numbers, "queued": numbers}
                            ),
                        }
                    ),
                    json_values,
                )
            )
            for index in range(draw(st.integers(0, 3)))
        }
        pool = {"inflight": draw(numbers), "concurrency": draw(numbers)}
        files.append(dump({"state": "active", "pool": pool, "servers": servers}))
    return files


@given(watched_files(), st.integers(0, 240))
def test_a_watched_runs_servers_figures_from_hostile_files_are_bounded(
    examples: Examples, texts: list[str], room: int
) -> None:
    """The watched header's "(server: R run, Q queued)" from hostile progress.json files:
    each figure in range or no figure (never NaN, inf, negative or past 1e18 a server), the
    header fitted to any width."""
    examples()
    note(str(texts)[:800])
    parsed = [ProgressFile.parse(json.loads(text)) for text in texts]
    pools = [p.pool for p in parsed if p is not None and p.pool is not None]
    loads = tuple(
        report.metrics
        for p in parsed
        if p is not None and p.servers
        for report in p.servers.values()
    )
    flight = WatchedFlight(
        sum(pool.inflight for pool in pools), sum(pool.concurrency for pool in pools), loads
    )
    activity = Activity("running", ("A",), (), watched_flight=flight)
    view = timed(header_view, {}, activity, quitting=False, idle="idle", filter_text="", hosts=())
    for figure in (view.server_running, view.server_queued):
        assert figure is None or 0 <= figure <= COUNT.high * max(1, len(loads)), view
    shown = timed(fit_parts, parts_of(view), room)
    assert sum(2 + len(part) for part in shown) <= room, (shown, room)
    for part in shown:
        assert not any(word in part.lower() for word in ("nan", "inf", "-")), part
