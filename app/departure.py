"""How the app goes away: `q`, SIGTERM, SIGHUP, and the wait for runs it started on a host.

Every way out but one ends in `App.exit`, after the runs of this process have drained (or
been aborted) so that every completed response is on disk: `q` asks first and drains, `q`
again aborts; SIGTERM aborts and leaves; runs this session started on a host (the demo's)
are stopped with the screen saying so. The one other way is SIGHUP: the terminal is gone,
Textual's own shutdown would block writing to it, so a thread waits for the runs' files to
close, runs the cleanups and ends the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from textual.app import App
from textual.screen import ModalScreen

from gen_tui.app.dashboard.hosted import HostedRuns
from gen_tui.app.dashboard.linked import HostLinks
from gen_tui.app.dashboard.screen import DashboardScreen
from gen_tui.app.dialogs.modals import ConfirmScreen
from gen_tui.app.host_links import (
    SHUTDOWN_GRACE_S,
    HostLink,
    leaving_answers,
    leaving_drain_s,
)
from gen_tui.backends.figures import counted

LEAVE_MARGIN_S = 10.0
"""On its way out, the app waits for the runs it started up to their grace and this much."""


class Departure:
    """The app's quit and hang-up paths; `quitting` is set once leaving has begun."""

    def __init__(
        self,
        app: App[int],
        hosted: HostedRuns,
        linked: HostLinks,
        cleanups: list[Callable[[], None]],
        dashboard: Callable[[], DashboardScreen | None],
    ) -> None:
        """`cleanups`: run on SIGHUP, which leaves without returning to the launcher (the
        demo's folder); `dashboard`: the screen, once the app has made it."""
        self.app = app
        self.hosted = hosted
        self.linked = linked
        self.cleanups = cleanups
        self.dashboard = dashboard
        self.quitting = False
        self._since: float | None = None
        """When the app began waiting for the runs it started to stop, on its way out."""
        self._hurried = False
        """`q` again while leaving: the runs started here were SIGKILLed, not drained."""
        self._leaving: list[HostLink] = []
        """The links whose started runs the exit waits for."""
        self._outer_handlers: dict[int, Any] = {}
        """The signal handlers in place before the app's own (put back at unmount)."""

    # signals

    def catch_signals(self) -> None:
        """SIGTERM and SIGHUP on the app's loop (at mount)."""
        loop = asyncio.get_running_loop()
        for signum, handler in (
            (signal.SIGTERM, self.on_sigterm),
            (signal.SIGHUP, self.on_sighup),
        ):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                self._outer_handlers[signum] = signal.getsignal(signum)
                loop.add_signal_handler(signum, handler)

    def unmounted(self) -> None:
        """The app is unmounting: put back the signal handlers, stop what still runs."""
        # asyncio's remove_signal_handler leaves the default action (die at once); put back
        # what was there before, so the launcher's handlers (the demo's folder) still run
        # for a signal that comes while the app's threads are being waited for.
        loop = asyncio.get_running_loop()
        for signum, outer in self._outer_handlers.items():
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError, TypeError):
                loop.remove_signal_handler(signum)
                signal.signal(signum, outer)
        # Last resort (an exit not through `q`): abort so the worker threads end and
        # asyncio.run, which waits for executor threads, can return.
        for run in self.hosted.active():
            run.abort()
        self.linked.stop()

    def on_sigterm(self) -> None:
        """Stop runs at once and leave the normal way, so `main` still cleans up."""
        for run in self.hosted.active():
            run.abort()
        self.quitting = True
        if not self.hosted.active():
            self.app.exit(0)

    def on_sighup(self) -> None:
        """The terminal went away (tmux pane or session killed).

        Nothing can be drawn any more, and Textual's own shutdown would block writing to
        the dead terminal, so: abort the runs, wait for their threads to close their
        files, run the cleanups (the demo folder) and leave.
        """
        for run in self.hosted.active():
            run.abort()
        self.linked.stop()

        def finish() -> None:
            for run in self.hosted.runs:
                run.done.wait(timeout=run.grace_s + 5)
            for link in self.linked.links:
                link.done.wait(timeout=SHUTDOWN_GRACE_S + 15)
            for cleanup in self.cleanups:
                with contextlib.suppress(Exception):
                    cleanup()
            os._exit(128 + signal.SIGHUP)

        threading.Thread(target=finish, name="gen-tui-hangup", daemon=True).start()

    # q

    def quit(self) -> None:
        """`q`: leave, draining this process's runs first (asked); `q` again aborts them."""
        app = self.app
        if isinstance(app.screen, ModalScreen):  # ctrl+q too: a dialog's own keys apply
            return
        active = self.hosted.active()
        if not active:
            if self._since is not None and not self._hurried:
                self._hurry()  # q again while the runs started here drain: end them now
                return
            if self._since is None and (links := self._started_live()):
                self._ask_to_stop_started(links)
                return
            app.exit(0)
            return
        if self.quitting:
            for run in active:
                run.abort()
            return
        datasets = ", ".join(name for run in active for name in run.names)
        grace = max(run.grace_s for run in active)
        answers = sum(snap.inflight for run in active for snap in run.snapshots())

        def decided(ok: bool | None) -> None:
            if not ok:
                return
            self.quitting = True
            if not self.hosted.active():
                # The run ended while the dialog was open: its end has already come, and
                # nothing would call exit again (the header stayed at QUITTING for good).
                app.exit(0)
                return
            for run in self.hosted.active():
                run.request_stop()
            app.notify(f"draining before exit (up to {grace:g} s); q again aborts", title="quit")
            if (dashboard := self.dashboard()) is not None:
                dashboard.refresh_view()

        app.push_screen(
            ConfirmScreen(
                "Quit gen-tui?",
                f"A run is active in this process: {datasets}.\n"
                f"Quitting stops it first: no new requests; the {counted(answers, 'answer')} "
                f"in flight {'drains' if answers == 1 else 'drain'} for up to {grace:g} s. "
                "Completed responses are kept; start again to resume.",
                "Stop and quit",
            ),
            decided,
        )

    def _started_live(self) -> list[HostLink]:
        """The links that stop the runs this session started as the app leaves."""
        return [link for link in self.linked.links if link.stops_started_runs]

    def _ask_to_stop_started(self, links: list[HostLink]) -> None:
        """`q` while only a run this session started on a host is active (the demo's B9):
        leaving stops it, which takes its drain, so ask first as for a run in this process
        (it used to leave without a word, and took ~33 s; issue 31, point 3)."""
        datasets = ", ".join(name for link in links for name in link.datasets)
        answers = leaving_answers(links)
        drain = leaving_drain_s(links)

        def decided(ok: bool | None) -> None:
            if ok:
                self.app.exit(0)  # hold_exit drains them, the line under the header counting

        self.app.push_screen(
            ConfirmScreen(
                "Quit gen-tui?",
                f"A run started here is active: {datasets}.\n"
                f"Quitting stops it first: its {counted(answers, 'answer')} in "
                f"flight {'drains' if answers == 1 else 'drain'} for up to {drain:.0f} s "
                "(q again then ends it at once). "
                "Completed responses are kept; r resumes it.",
                "Stop and quit",
            ),
            decided,
        )

    def hold_exit(self, leave: Callable[[], None]) -> bool:
        """Runs this session started on a host (the demo's) drain before the app goes, with
        the screen saying so: the seconds they take used to pass on a blank terminal.
        True: `leave` is called once they have ended (or once their kill's wait is over,
        whatever they do; `q` again leaves at once), and the exit must wait for it."""
        links = self._started_live()
        dashboard = self.dashboard()
        if self._since is not None or not links or dashboard is None:
            return False
        self._since = time.monotonic()
        self.quitting = True
        # `q` from a view over the panels (quality, samples, history): back to the panels,
        # where the notice and the header's state say what the exit waits for
        while self.app.screen is not dashboard and len(self.app.screen_stack) > 1:
            self.app.pop_screen()
        self._leaving = links
        answers = leaving_answers(links)
        self.linked.stop()
        drain = leaving_drain_s(links)
        limit = LEAVE_MARGIN_S + drain
        said = ""

        def check() -> None:
            nonlocal said
            waited = time.monotonic() - (self._since or 0.0)
            if all(link.done.is_set() for link in links) or waited > limit:
                leave()
                return
            if self._hurried:
                return
            # What the exit waits for and for how long, counted down; short enough for 80
            # columns (it used to be cut before its "q again leaves now").
            text = leaving_notice(answers, max(drain - waited, 0.0))
            if text != said:
                said = text
                dashboard.set_notice(text)

        check()
        self.app.set_interval(0.2, check, name="leaving")
        return True

    def _hurry(self) -> None:
        """`q` again while the runs started here drain: SIGKILL them now, and say so; the
        exit follows as soon as their links have closed (a `q` more leaves at once)."""
        self._hurried = True
        for link in self._leaving:
            link.hurry()
        if (dashboard := self.dashboard()) is not None:
            dashboard.set_notice("quitting: ending the runs started here now… (q: leave at once)")


def leaving_notice(answers: int, left_s: float) -> str:
    """The line under the header while the runs this session started drain before the exit:
    at most 78 characters (an 80-column terminal less the line's padding)."""
    return (
        f"quitting: runs started here drain {counted(answers, 'answer')}, "
        f"{left_s:.0f} s left · q: leave now"
    )
