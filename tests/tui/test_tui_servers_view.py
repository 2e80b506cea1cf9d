"""The servers view (issue 32): the panel supervises the config's `[[servers]]` (real
`gen-tui sim` processes started from recipes) in a thread of its own and lists them, a
line each; `kill -9` of one shows exited, restarting, healthy again; `q` leaves them
running and the next panel adopts them (same pids, restarts kept); a server not ours is
restarted only after a question naming its pid and owner; edited flags restart with the
new argv."""

from __future__ import annotations

import asyncio
import getpass
import os
import re
import signal
from pathlib import Path
from typing import Any

import psutil
import pytest
from textual.widgets import Checkbox

from gen_tui.app.dialogs.modals import ConfirmScreen
from gen_tui.app.dialogs.peek import LogScreen
from gen_tui.app.dialogs.servers import FlagsScreen
from gen_tui.backends.config.file import load_config
from tests.support.polling import wait_until
from tests.support.ports import free_port
from tests.support.runs import ENV, GEN_TUI, alive
from tests.support.servers_view import (
    cell,
    open_view,
    panel,
    sim_config,
    strip_text,
    until_state,
)
from tests.support.tui import Notes

pytestmark = pytest.mark.timeout(300)
SIZE = (160, 40)


async def test_kill_9_restarts_and_a_new_panel_adopts(
    tmp_path: Path, state: Path, hook: tuple[str, list[dict[str, Any]]]
) -> None:
    url, received = hook
    ports = {"a": free_port(), "b": free_port()}
    config = sim_config(tmp_path / "gen-tui.toml", ports, alerts=url, devices={"a": "0,1"})
    app = panel(config)
    async with app.run_test(size=SIZE) as pilot:
        await open_view(app, pilot)
        pid_a = await until_state(app, pilot, "a", "healthy")
        pid_b = await until_state(app, pilot, "b", "healthy")
        assert pid_a != pid_b and alive(int(pid_a)) and alive(int(pid_b))
        assert cell(app, "a", "restarts") == "0"
        assert cell(app, "a", "gpus") == "0,1" and cell(app, "b", "gpus") == "-"
        os.kill(int(pid_a), signal.SIGKILL)
        seen: list[str] = []

        def healthy_again() -> bool:
            word = cell(app, "a", "state")
            if not seen or seen[-1] != word:
                seen.append(word)
            return word == "healthy" and cell(app, "a", "pid/job") != pid_a

        await wait_until(healthy_again, 60, "a healthy again", pause=pilot.pause,
                         detail=lambda: repr(seen))  # fmt: skip
        after = seen[seen.index(next(w for w in seen if "exited: SIGKILL" in w)) :]
        assert any(w.startswith("restarting in") for w in after), seen
        assert after[-1] == "healthy", seen
        new_a = cell(app, "a", "pid/job")
        assert cell(app, "a", "restarts") == "1"
        assert cell(app, "b", "pid/job") == pid_b  # the other one untouched
        events = "\n".join(text for _, text in app.events)
        assert "server a exited" in events and "healthy again" in events
        await wait_until(lambda: len(received) >= 2, 30, "two alerts", pause=pilot.pause)
        bodies = [alert["message"] for alert in received]
        assert any("server a exited" in body for body in bodies), bodies
        assert any("healthy again" in body for body in bodies), bodies
        await pilot.press("escape")
        await pilot.press("q")
        await wait_until(lambda: not app.is_running, 20, "the panel quits", pause=pilot.pause)
    assert alive(int(new_a)) and alive(int(pid_b))  # q left them running

    again = panel(config)
    async with again.run_test(size=SIZE) as pilot:
        await open_view(again, pilot)
        assert await until_state(again, pilot, "a", "healthy") == new_a
        assert await until_state(again, pilot, "b", "healthy") == pid_b
        assert cell(again, "a", "restarts") == "1"  # kept in the state file
        assert cell(again, "a", "up") not in ("", "-")
        # Said as adopted, not as a new start ("loading ... answered after 0 s" was).
        events = "\n".join(text for _, text in again.events)
        assert f"server a loading: adopted (an earlier gen-tui started it) pid {new_a}," in (
            events
        ), events
        assert "server a healthy: adopted, answering (1 restart(s) this hour)" in events, events
        assert "answered after" not in events, events
        # A restart after the adoption is a restart again, not "adopted".
        os.kill(int(pid_b), signal.SIGKILL)
        await wait_until(
            lambda: cell(again, "b", "state") == "healthy" and cell(again, "b", "pid/job") != pid_b,
            60,
            "b healthy again",
            pause=pilot.pause,
        )
        events = "\n".join(text for _, text in again.events)
        assert "server b healthy: healthy again (1 restart(s) this hour)" in events, events
        assert events.count("adopted, answering") == 2, events
        await pilot.press("escape")
        # The strip under the header: a line per server, with its supervised state.
        text = await wait_until(
            lambda: "a: healthy" in (t := strip_text(again)) and "b: healthy" in t and t,
            20,
            "the strip",
            pause=pilot.pause,
        )
        assert f"127.0.0.1:{ports['a']}" in text
        await pilot.press("q")


async def test_the_strip_counts_a_restart_down(tmp_path: Path, state: Path) -> None:
    """While the supervisor waits its backoff before a restart, the strip under the header
    says when it restarts ("gpu0: restarting in 12 s", counting down), not "restarting"."""
    config = sim_config(tmp_path / "gen-tui.toml", {"gpu0": free_port()}, backoff_s=12.0)
    app = panel(config)
    async with app.run_test(size=SIZE) as pilot:
        await open_view(app, pilot)
        pid = await until_state(app, pilot, "gpu0", "healthy")
        await pilot.press("escape")
        os.kill(int(pid), signal.SIGKILL)
        counts: list[int] = []

        def counting() -> bool:
            found = re.search(r"gpu0: restarting in (\d+) s", strip_text(app))
            if found is not None and (not counts or counts[-1] != int(found.group(1))):
                counts.append(int(found.group(1)))
            return len(counts) >= 3

        await wait_until(counting, 30, "the countdown", pause=pilot.pause,
                         detail=lambda: f"{counts} {strip_text(app)!r}")  # fmt: skip
        assert 9 <= counts[0] <= 12, counts
        assert counts == sorted(counts, reverse=True) and len(set(counts)) == len(counts), counts
        assert "gpu0: restarting\n" not in strip_text(app) + "\n"
        await pilot.press("q")


async def test_a_server_not_ours_is_restarted_only_when_confirmed(
    tmp_path: Path, state: Path
) -> None:
    port = free_port()
    hand = await asyncio.create_subprocess_exec(
        *GEN_TUI, "sim", "--port", str(port), env=ENV, start_new_session=True,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        config = sim_config(tmp_path / "gen-tui.toml", {"mine": port})
        # The hand-started server answers before the panel looks: it is not ours.
        import aiohttp

        async def answers() -> bool:
            try:
                async with (
                    aiohttp.ClientSession() as session,
                    session.get(f"http://127.0.0.1:{port}/health") as response,
                ):
                    return response.status == 200
            except aiohttp.ClientError:
                return False

        deadline = asyncio.get_running_loop().time() + 60
        while not await answers():
            assert asyncio.get_running_loop().time() < deadline, "the hand-started sim"
            await asyncio.sleep(0.2)
        app = panel(config)
        async with app.run_test(size=SIZE) as pilot:
            await open_view(app, pilot)
            await until_state(app, pilot, "mine", "not ours")
            await wait_until(lambda: cell(app, "mine", "pid/job") == f"pid {hand.pid}", 20,
                             "its pid", pause=pilot.pause)  # fmt: skip
            await pilot.press("r")
            await wait_until(lambda: isinstance(app.screen, ConfirmScreen), 10, "the question")
            body = str(app.screen.query_one("#confirm-body").render())
            assert f"pid {hand.pid}" in body and getpass.getuser() in body
            await pilot.press("n")
            await pilot.pause(2)
            assert hand.returncode is None and cell(app, "mine", "state") == "not ours"
            await pilot.press("r")
            await wait_until(lambda: isinstance(app.screen, ConfirmScreen), 10, "the question")
            await pilot.press("y")
            pid = await until_state(app, pilot, "mine", "healthy")
            assert int(pid) != hand.pid
            await asyncio.wait_for(hand.wait(), 20)  # the hand-started one was stopped
            await pilot.press("q")
    finally:
        if hand.returncode is None:
            hand.kill()
            await hand.wait()


async def test_edited_flags_restart_with_the_new_argv(tmp_path: Path, state: Path) -> None:
    config = sim_config(tmp_path / "gen-tui.toml", {"solo": free_port()})
    app = panel(config)
    async with app.run_test(size=SIZE) as pilot:
        await open_view(app, pilot)
        first = await until_state(app, pilot, "solo", "healthy")
        await pilot.press("e")
        await wait_until(lambda: isinstance(app.screen, FlagsScreen), 10, "the flags dialog")
        field = app.screen.query_one("#flags")
        assert "--tokens-per-s 2000" in field.value  # type: ignore[attr-defined]
        field.value = field.value.replace("2000", "1500")  # type: ignore[attr-defined]
        app.screen.query_one("#flags-save", Checkbox).value = True  # kept in the file too
        before = config.read_text()
        field.focus()
        await pilot.press("enter")

        def restarted() -> str:
            pid = cell(app, "solo", "pid/job")
            ok = pid not in ("", "-", first) and cell(app, "solo", "state") == "healthy"
            return pid if ok else ""

        pid = await wait_until(restarted, 90, "solo restarted", pause=pilot.pause)
        assert psutil.Process(int(pid)).cmdline()[-1] == "1500"
        assert not alive(int(first))
        saved = config.read_text()  # the argv changed in place, the rest as it was
        assert load_config(config).servers[0].argv[-1] == "1500"
        assert saved.split("argv")[0] == before.split("argv")[0]
        assert saved.split("port = ")[1] == before.split("port = ")[1]

        # L: the server's own log, read in the servers' thread.
        await pilot.press("L")
        await wait_until(lambda: isinstance(app.screen, LogScreen), 10, "the log screen")
        lines = await wait_until(
            lambda: getattr(app.screen, "lines", ()), 20, "the log's lines", pause=pilot.pause
        )
        written = (state / "solo.log").read_text().splitlines()
        assert lines[0] in written and any(line.strip() for line in lines)
        await pilot.press("escape")

        # k stops it for good (not restarted); s starts it again.
        await pilot.press("k")
        await until_state(app, pilot, "solo", "stopped", timeout=30)
        await wait_until(lambda: not alive(int(pid)), 20, "the server gone", pause=pilot.pause)
        await pilot.pause(2)
        assert cell(app, "solo", "state") == "stopped"
        await pilot.press("s")
        again = await until_state(app, pilot, "solo", "healthy")
        assert again not in (pid, first) and psutil.Process(int(again)).cmdline()[-1] == "1500"
        await pilot.press("q")


async def test_the_servers_key_is_in_help_and_remappable() -> None:
    """`S` is in the key map: help lists it, `[keys] servers` moves it, and without
    `[[servers]]` it says so in one line."""
    from gen_tui.app.dashboard.keys import DASHBOARD_KEYS, build_keymap, help_rows
    from gen_tui.app.tui import GenTuiApp

    rows = {row.key: row.description for row in help_rows(DASHBOARD_KEYS)}
    assert rows.get("S") == "Servers"
    keymap = build_keymap([("servers", "V")], vim=False, bindings=DASHBOARD_KEYS)
    app = GenTuiApp(None, keymap=keymap)
    notes = Notes()
    async with app.run_test(size=SIZE, message_hook=notes) as pilot:
        await pilot.press("S")  # moved away: nothing
        await pilot.pause(0.3)
        assert not notes.find("no [[servers]]")
        await pilot.press("V")
        await wait_until(lambda: notes.find("no [[servers]]"), 10, "the line", pause=pilot.pause)


async def test_servers_that_cannot_be_supervised_say_why_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The state folder cannot be made (a file is in its way): the view's title and a toast
    say so in one line; the panel stays up."""
    blocker = tmp_path / "state"
    blocker.write_text("not a folder")
    monkeypatch.setenv("XDG_STATE_HOME", str(blocker))
    app = panel(sim_config(tmp_path / "gen-tui.toml", {"a": free_port()}))
    notes = Notes()
    async with app.run_test(size=SIZE, message_hook=notes) as pilot:
        await open_view(app, pilot)
        found = await wait_until(
            lambda: notes.find("not supervised"), 20, "the line", pause=pilot.pause
        )
        assert "\n" not in found[0][1] and "Traceback" not in found[0][1]
        # The title is redrawn each REFRESH_S, the toast comes at once: wait for the next.
        title = await wait_until(
            lambda: (
                "Servers: the servers are not supervised"
                in str(app.screen.query_one("#servers-title").render())
            ),
            5,
            "the title",
            pause=pilot.pause,
        )
        assert title
        assert cell(app, "a", "state") == ""  # nothing listed, nothing started
