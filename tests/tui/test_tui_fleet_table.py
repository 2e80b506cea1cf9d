"""The table view over a fleet (issue 31, request 1: "one line per dataset, and per host for
a fleet"): with more than one host shown, a line per host (its link's state, its datasets
by state, its tokens and tok/s) above its datasets; the cursor steps over those lines, `o`
sorts within each host, and a lone host has none.

First the app fed snapshots by hand (figures chosen to add up); then the real app with a
real link to a folder of this machine where a real stand-in run writes, whose line says
what its link says.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from gen_tui.app.host_links import HostLink
from gen_tui.app.host_sources import host_source
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.progress.snapshot import DatasetState
from tests.support.polling import wait_until
from tests.support.runs import standin_argv
from tests.support.static_source import StaticSnapshot
from tests.support.table_app import (
    board,
    run_of,
    selected,
    shown,
    snapshot,
    static_app,
    table,
    table_text,
)
from tests.support.tui import SIZE

FLEET = [
    snapshot("A1", host="gpu-a", tokens=1_000_000, tok_s=10_000.0),
    snapshot("B1", host="gpu-b", tokens=300_000, tok_s=5_000.0),
    snapshot("A2", host="gpu-a", tokens=400_000, tok_s=30_000.0),
    snapshot("A3", host="gpu-a", tokens=2_000_000, tok_s=0.0, state=DatasetState.DONE),
    snapshot("B2", host="[b]gpu-b[/b]", tokens=7, tok_s=0.0, state=DatasetState.DONE),
]


async def test_a_line_per_host_above_its_datasets_with_its_totals() -> None:
    names = [snap.name for snap in FLEET]
    app, static = static_app(names)
    async with app.run_test(size=(120, 30)) as pilot:
        await shown(pilot, app, static, run_of(*FLEET))
        await pilot.press("t")
        await wait_until(lambda: board(app).table_shown, 3, pause=pilot.pause)
        await wait_until(lambda: "on 3 hosts" in table_text(app)[0], 3, pause=pilot.pause)
        lines = [line.rstrip() for line in table_text(app)]
        assert lines[0].startswith(" 5 datasets on 3 hosts · sort: config (o)"), lines[0]
        body = [line for line in lines[2:] if line]
        assert body[0] == (" gpu-a · 3 datasets: 2 running, 1 done · 3.4M tokens · 40k tok/s"), (
            body[0]
        )
        assert [line.split()[0] for line in body[1:4]] == ["A1", "A2", "A3"]
        assert body[4] == " gpu-b · 1 dataset: 1 running · 300k tokens · 5k tok/s", body[4]
        assert body[5].split()[0] == "B1"
        assert body[6] == " [b]gpu-b[/b] · 1 dataset: 1 done · 7 tokens · 0 tok/s", body[6]
        assert body[7].split()[0] == "B2" and len(body) == 8
        assert table(app).host_lines == 3

        # the cursor steps over the hosts' lines: A3 then B1
        table(app).select("A3")
        await pilot.press("down")
        await wait_until(lambda: selected(app) == "B1", 3, pause=pilot.pause)
        await pilot.press("up")
        await wait_until(lambda: selected(app) == "A3", 3, pause=pilot.pause)

        await pilot.press("o", "o", "o", "o")  # config, state, % done, ETA, tok/s
        await wait_until(lambda: "sort: tok/s" in table_text(app)[0], 3, pause=pilot.pause)
        body = [line.rstrip() for line in table_text(app)[2:] if line.strip()]
        assert body[0].startswith(" gpu-a ·"), "sorted within each host, hosts kept"
        assert [line.split()[0] for line in body[1:4]] == ["A2", "A1", "A3"]


async def test_one_host_has_no_host_line() -> None:
    names = ["A1", "A2"]
    app, static = static_app(names)
    async with app.run_test(size=SIZE) as pilot:
        await shown(pilot, app, static, run_of(snapshot("A1"), snapshot("A2")))
        await pilot.press("t")
        await wait_until(lambda: board(app).table_shown, 3, pause=pilot.pause)
        lines = table_text(app)
        assert lines[0].startswith(" 2 datasets · sort"), lines[0]
        assert [line.split()[0] for line in lines[2:4]] == ["A1", "A2"]
        assert table(app).host_lines == 0


def _said(link: HostLink) -> str:
    monitor = link.monitor
    seen = (list(monitor.totals), monitor.watch_state) if monitor is not None else None
    return f"{link.name}: {link.state}, datasets {link.datasets}, totals and stream {seen}"


async def test_a_watched_hosts_line_says_its_links_state(tmp_path: Path, standin: Path) -> None:
    """A real link to a folder of this machine, named "left", where a real stand-in run
    writes L1, beside a dataset of another host (fed by hand): left's line says what its
    link says, under its own totals."""
    out = tmp_path / "left"
    (out / "L1").mkdir(parents=True)  # a run already under way there
    run = subprocess.Popen(
        standin_argv(standin, str(out), "L1"), stdout=subprocess.DEVNULL, start_new_session=True
    )
    static = StaticSnapshot(["B1"], 1e9)
    app = GenTuiApp(
        None, names=["B1"], sources=[static], hosts=[host_source("local", str(out), name="left")]
    )
    try:
        async with app.run_test(size=(120, 30)) as pilot:

            def lines() -> list[str]:
                return [line.rstrip() for line in table_text(app)] if board(app).table_shown else []

            await shown(pilot, app, static, run_of(snapshot("B1", host="gpu-b")))
            await wait_until(lambda: len(board(app).panels()) == 2, 30, pause=pilot.pause)
            await pilot.press("t")
            await wait_until(
                lambda: (
                    any(line.startswith(" left · connected · 1 dataset: 1 ") for line in lines())
                    and any(" left:" in line for line in lines())
                ),
                60,
                pause=pilot.pause,
                detail=lambda: "\n".join([*lines(), *map(_said, app.links)]),
            )
            body = [line for line in lines()[2:] if line]
            assert len(body) == 4, body
            (at,) = [i for i, line in enumerate(body) if line.startswith(" left · ")]
            assert body[at + 1].split()[0] == "L1" and " left:" in body[at + 1]
            (at,) = [i for i, line in enumerate(body) if line.startswith(" gpu-b · ")]
            assert body[at] == " gpu-b · 1 dataset: 1 running · 500k tokens · 20k tok/s", body
            assert body[at + 1].split()[0] == "B1"
    finally:
        app.stop_links()
        for link in app.links:
            link.done.wait(timeout=30)
        run.kill()
        run.wait()


async def test_the_demo_on_one_machine_has_no_host_lines(tmp_path: Path) -> None:
    """The demo's datasets run in this process, its stale B9 in a run a local link watches:
    one machine, one link, so no host lines (this process's runs are not a host of a
    fleet; they would go under a "this process" line beside two hosts)."""
    from gen_tui.app.cli.launch import demo_app

    app = demo_app(tmp_path, autostart=False)
    try:
        async with app.run_test(size=(120, 30)) as pilot:
            link = app.links[0]
            await wait_until(lambda: link.started, 60, "the stale run", pause=pilot.pause)
            await wait_until(lambda: len(board(app).panels()) == 9, 30, pause=pilot.pause)
            await pilot.press("t")
            await wait_until(lambda: board(app).table_shown, 3, pause=pilot.pause)
            await pilot.pause(0.5)
            assert table_text(app)[0].startswith(" 9 datasets · sort"), table_text(app)[0]
            assert table(app).host_lines == 0
    finally:
        app.stop_links()
        for link in app.links:
            link.done.wait(timeout=40)


async def test_two_watched_hosts_each_have_their_line(tmp_path: Path, standin: Path) -> None:
    """Two real links to two folders of this machine, "left" and "right", a real stand-in
    run writing in each: both links' watcher streams start, and each host's line says its
    link is connected, above the dataset its run writes. (Once one of the two streams never
    started, about one run in twelve on a loaded machine: issue 31's residual 5.)"""
    runs = []
    hosts = []
    for side, dataset in (("left", "L1"), ("right", "R1")):
        out = tmp_path / side
        (out / dataset).mkdir(parents=True)
        argv = standin_argv(standin, str(out), dataset)
        runs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, start_new_session=True))
        hosts.append(host_source("local", str(out), name=side))
    app = GenTuiApp(None, hosts=hosts)
    try:
        async with app.run_test(size=(120, 30)) as pilot:

            def lines() -> list[str]:
                return [line.rstrip() for line in table_text(app)] if board(app).table_shown else []

            await wait_until(
                lambda: len(board(app).panels()) == 2, 60, pause=pilot.pause,
                detail=lambda: "\n".join(map(_said, app.links)),
            )  # fmt: skip
            await pilot.press("t")
            for side, dataset in (("left", "L1"), ("right", "R1")):
                await wait_until(
                    lambda side=side: any(  # type: ignore[misc]
                        line.startswith(f" {side} · connected · 1 dataset: 1 running")
                        for line in lines()
                    ),
                    60,
                    f"{side}'s line, its run seen writing",
                    pause=pilot.pause,
                    detail=lambda: "\n".join([*lines(), *map(_said, app.links)]),
                )
                body = [line for line in lines()[2:] if line]
                (at,) = [i for i, line in enumerate(body) if line.startswith(f" {side} · ")]
                assert body[at + 1].split()[0] == dataset, body
            assert table(app).host_lines == 2
    finally:
        app.stop_links()
        for link in app.links:
            link.done.wait(timeout=30)
        for run in runs:
            run.kill()
            run.wait()
