"""The control panel under abuse: keys hammered while the SSH link under it drops and freezes.

The panel (a real `GenTuiApp`, driven by Pilot) watches one dataset on a real loopback sshd,
written by a real `gen-tui run` against a real `gen-tui sim`, started over SSH. Each step
presses a burst of keys a hurried person might (`k` then `y` or `n` or escape, `r` with a
good or a bad budget, the run list and its own `k`, help, the filter, arrows), in random
order and at random gaps; meanwhile the sshd process serving the panel is killed or frozen
at random moments. What must hold, checked by the suite's own /proc sampler and checker:

- the app never crashes and never hangs: each burst is answered, and the app is still up;
- no toast shows a traceback or an internal error;
- never two live runs of the dataset, never two writers, the writer holds the lock;
- the panel's totals never go backwards and are never ahead of the file;
- records once on disk stay, byte for byte, with no sample_id twice;
- once the link heals and every run is stopped, the panel equals a full recount.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psutil

from gen_tui.app.dashboard.rules import panel_id
from gen_tui.app.host_sources import host_source
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.demo import write_prompts
from gen_tui.backends.hosts import SSHHost
from gen_tui.widgets.dataset_panel import DatasetPanel
from tests.support.polling import wait_until
from tests.support.sshd import Sshd
from tests.support.tui import SIZE, Notes, snap

from .checker import FolderState, check_folder, prompt_ids, split_records
from .link import KEEPALIVE, Truth, alive, shape
from .procs import SimProcess

NAME = "Abuse"  # a name no other test uses: the panel sees every run of it here
STEPS_PER_ITERATION = 12
SIM_ARGS = ["--slots", "4", "--tokens-per-s", "400", "--default-mean", "60"]
BURSTS: list[list[str]] = [
    ["k", "y"],
    ["k", "n"],
    ["k", "escape"],
    ["r", *"999999999", "enter"],
    ["r", *"12x", "enter", "escape"],
    ["r", "escape"],
    ["l", "down", "up", "escape"],
    ["l", "k", "y", "escape"],
    ["l", "r", *"999999999", "enter", "escape"],
    ["s", "escape"],
    ["question_mark", "question_mark"],
    ["slash", "A", "b", "escape"],
    ["down", "up", "right", "left"],
    ["p"],
    ["escape", "escape"],
]
BAD_WORDS = ("Traceback", "internal error", "Exception", "NoneType")


def file_totals(folder: Path) -> tuple[int, int]:
    """(tokens, records) of the whole lines in the record file now, by the suite's parser."""
    raw = folder / "raw_responses.jsonl"
    data = raw.read_bytes() if raw.exists() else b""
    records, _ = split_records(data, str(raw))
    return sum(r.tokens for r in records), len(records)


class LinkFaults:
    """Kill, or freeze then thaw, every sshd session (the panel's link is the only one)."""

    def __init__(self, server: Sshd) -> None:
        self.server = server
        self.kills = 0
        self.freezes = 0
        self.frozen: set[int] = set()

    def kill(self) -> None:
        for process in self.server.sessions():
            with contextlib.suppress(psutil.NoSuchProcess):
                process.send_signal(signal.SIGKILL)
        self.kills += 1

    async def freeze(self, seconds: float) -> None:
        for process in self.server.sessions():
            with contextlib.suppress(psutil.NoSuchProcess):
                process.send_signal(signal.SIGSTOP)
                self.frozen.add(process.pid)
        self.freezes += 1
        try:
            await asyncio.sleep(seconds)
        finally:
            self.thaw()

    def thaw(self) -> None:
        for pid in list(self.frozen):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
            self.frozen.discard(pid)


async def test_the_panel_survives_keys_hammered_while_its_link_drops(
    sshd: Sshd, tmp_path: Path, tokenizer_dir: Path, chaos_iterations: int, chaos_report: Any
) -> None:
    seed = int(os.environ.get("CHAOS_SEED", random.randrange(2**32)))
    print(f"tui abuse seed: CHAOS_SEED={seed}")
    rng = random.Random(seed)
    prompts = tmp_path / "prompts"
    write_prompts(prompts / f"{NAME}.jsonl", 3000 + 1000 * chaos_iterations)
    ids = prompt_ids(prompts / f"{NAME}.jsonl")
    sim = SimProcess(tmp_path / "sim", SIM_ARGS).start()
    out = tmp_path / "out"
    out.mkdir()
    argv = [
        *(sys.executable, "-m", "gen_tui.app.cli", "run"),
        *("--prompts-dir", str(prompts), "--tokenizer", str(tokenizer_dir)),
        *("--output-dir", str(out), "--server-url", sim.url, "--datasets", NAME),
        *("--plain", "--concurrency", "2", "--max-new-tokens", "256", "--grace", "10"),
    ]
    starter = SSHHost("starter", sshd.alias, str(out), options=sshd.options())
    await starter.connect()
    await starter.start(argv, str(tmp_path / "first.log"))
    await starter.close()

    truth = Truth(out, (NAME,))
    truth.start()
    faults = LinkFaults(sshd)
    source = host_source(sshd.alias, str(out), options=sshd.options(**KEEPALIVE), grace_s=10.0)
    app = GenTuiApp(None, hosts=[source], stale_after_s=5.0)
    link = app.links[0]
    notes = Notes()
    state = FolderState(out / NAME)
    presses = 0
    shown: list[tuple[int, int]] = []
    background: set[asyncio.Task[None]] = set()
    started = time.monotonic()

    def watch_panel() -> None:
        """The panel's totals: never backwards, never ahead of the file."""
        current = snap(app, NAME)
        if current is None:
            return
        pair = (current.tokens, current.samples)
        if shown:
            assert pair[0] >= shown[-1][0] and pair[1] >= shown[-1][1], (shown[-1], pair)
        on_disk = file_totals(out / NAME)
        assert pair[0] <= on_disk[0] and pair[1] <= on_disk[1], (pair, on_disk)
        shown.append(pair)

    try:
        async with app.run_test(size=SIZE, message_hook=notes) as pilot:
            await wait_until(lambda: app.query(f"#{panel_id(NAME)}"), 60, pause=pilot.pause)
            await wait_until(
                lambda: snap(app, NAME) and snap(app, NAME).samples, 60, pause=pilot.pause
            )
            for _ in range(STEPS_PER_ITERATION * chaos_iterations):
                roll = rng.random()
                if roll < 0.15:
                    faults.kill()
                elif roll < 0.3:
                    task = asyncio.create_task(faults.freeze(rng.uniform(0.5, 3.0)))
                    background.add(task)
                    task.add_done_callback(background.discard)
                for key in rng.choice(BURSTS):
                    await pilot.press(key)
                    presses += 1
                    await pilot.pause(rng.uniform(0.0, 0.3))
                await pilot.pause(rng.uniform(0.2, 1.5))
                assert app.is_running, "the app went down under the keys"
                watch_panel()
                assert not truth.violations, truth.violations

            # Heal: thaw, back to the dashboard, the link up again.
            await asyncio.gather(*background)
            faults.thaw()
            while app.screen is not app.screen_stack[0]:
                await pilot.press("escape")
            await wait_until(lambda: link.state == "connected", 90, pause=pilot.pause)
            # Stop every run directly (the panel's k may have been cut off half-way), then
            # the panel must settle on exactly what the file holds.
            for pid, _ in truth.runs_of(NAME):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
                    os.kill(pid, signal.SIGTERM)
            await wait_until(lambda: not truth.runs_of(NAME), 60, pause=pilot.pause)
            recount = file_totals(out / NAME)
            await wait_until(
                lambda: (
                    snap(app, NAME) and (snap(app, NAME).tokens, snap(app, NAME).samples) == recount
                ),
                60,
                pause=pilot.pause,
            )
            watch_panel()
            assert isinstance(app.query_one(f"#{panel_id(NAME)}"), DatasetPanel)
    finally:
        faults.thaw()
        app.stop_links()
        link.done.wait(timeout=30)
        truth.halt()
        for key in list(truth.seen[NAME]):
            if alive(key):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(key[0], signal.SIGKILL)
        sim.stop()
    assert not truth.violations, truth.violations
    check_folder(state, ids, clean_exit=False)
    toasts = [f"{title}: {message}" for title, message, _ in notes.items]
    for kind, count in Counter(shape(toast) for toast in toasts).most_common():
        print(f"toast x{count}: {kind}")
    bad = [toast for toast in toasts if any(word in toast for word in BAD_WORDS)]
    assert not bad, bad
    records = state.records_now()
    chaos_report(
        scenario="control panel under abuse",
        iterations=chaos_iterations,
        key_presses=presses,
        link_kills=faults.kills,
        link_freezes=faults.freezes,
        runs_started=len(truth.seen[NAME]),
        toasts=len(toasts),
        records_checked=len(records),
        lost=len(state.ever - {record.sample_id for record in records}),
        duplicated=len(records) - len({record.sample_id for record in records}),
        elapsed_s=round(time.monotonic() - started, 1),
    )
