"""A batch run (`--api openai-batch`), hosted by this process or watched on a host over SSH,
under Pilot: the dataset panel's
line for its batches in flight (status, the provider's counts, age against the 24 h window,
ETA), `k`'s dialog saying they are cancelled and what the provider bills, the cost saved
against the live price, and the run detail view's lines for them (issue 33).

The engine runs against the simulator's Batch API in its own loop, as in the other
engine-run tests: the panel only ever sees snapshots.
"""

from __future__ import annotations

import dataclasses
import os
import signal
from collections.abc import Callable
from pathlib import Path

from gen_tui.app.dashboard.rules import panel_id
from gen_tui.app.dialogs.modals import ConfirmScreen
from gen_tui.app.dialogs.run_detail import batch_fields
from gen_tui.app.host_sources import host_source
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.config.run import DatasetSpec, EngineConfig
from gen_tui.backends.demo import write_prompts
from gen_tui.backends.hosts import SSHHost
from gen_tui.backends.progress.batches import BatchView
from gen_tui.backends.progress.snapshot import DatasetState
from gen_tui.backends.sim import LengthProfile, SimConfig
from gen_tui.widgets.dataset_panel import detail_parts
from gen_tui.widgets.dataset_table import row_for
from tests.support.batch_sim import batch_args, sim_call, sim_process
from tests.support.panel_snapshots import T0, snapshot
from tests.support.polling import wait_until
from tests.support.runs import GEN_TUI, alive
from tests.support.sshd import Sshd
from tests.support.tui import SIZE, SimSource, panel, snap


def batch_app(
    tmp_path: Path, tokenizer_dir: Path, prompts_dir: Callable[..., Path], vocab_size: int
) -> GenTuiApp:
    """One dataset sent as batches of 20, three in flight, each taking 8 s at the sim."""
    folder = prompts_dir(A=400)
    config = EngineConfig(
        datasets=[DatasetSpec("A", folder / "A.jsonl", max_tokens=10**7)],
        server_urls=[],
        tokenizer=str(tokenizer_dir),
        output_dir=tmp_path / "out",
        api="openai-batch",
        model="sim-model",
        sampling={"max_new_tokens": 256},
        batch_max_requests=20,
        batch_in_flight=3,
        batch_poll_s=0.1,
        grace_s=30.0,
    )
    sim = SimConfig(
        vocab_size=vocab_size,
        default_profile=LengthProfile(mean=100.0),
        cost_per_million=(1.0, 4.0),
        batch_validate_s=0.0,
        batch_delay_s=8.0,
    )
    return GenTuiApp(SimSource(config, sim))


async def test_the_panel_shows_the_batches_and_k_says_they_are_cancelled_and_billed(
    tmp_path: Path, tokenizer_dir: Path, prompts_dir: Callable[..., Path], vocab_size: int
) -> None:
    app = batch_app(tmp_path, tokenizer_dir, prompts_dir, vocab_size)
    async with app.run_test(size=SIZE) as pilot:
        seen = await wait_until(
            lambda: (
                (s := snap(app, "A"))
                and len(s.batches) == 3
                and all(b.completed > 0 for b in s.batches)
                and s
            ),
            pause=pilot.pause,
            timeout=60,
        )
        first, second = detail_parts(panel(app, "A").view)
        line = second[0]
        assert line.startswith("3 batches: in_progress "), line
        assert "/60" in line and " of 24h" in line and " · ETA " in line, line
        assert not any(part.startswith("ETA ") for part in first)  # the batches' ETA, not tok/s
        assert not any("requests done" in part for part in second)  # said once, in the line
        drawn = "\n".join("".join(text for text, _ in row) for row in panel(app, "A").lines())
        assert "3 batches: in_progress" in drawn, drawn
        assert all(b.id.startswith("batch_") and b.total == 20 for b in seen.batches)
        # the table's ETA is the batches' too
        assert row_for("A", panel(app, "A").view).eta != "-"

        await pilot.press("k")
        screen = await wait_until(
            lambda: isinstance(app.screen, ConfirmScreen) and app.screen, pause=pilot.pause
        )
        body = screen.body
        assert "Its 3 batches in flight" in body, body
        assert "are cancelled at the provider" in body
        assert "bills the requests each finished before the cancel" in body
        await pilot.press("y")
        await wait_until(
            lambda: (s := snap(app, "A")) and s.state is DatasetState.STOPPED,
            pause=pilot.pause,
            timeout=60,
        )
        final = snap(app, "A")
        assert final is not None and final.batches == ()  # cancelled, collected: none left
        assert final.cost and final.cost_saved
        # the simulator bills batches at half the live price: as much saved as spent
        assert abs(final.cost_saved - final.cost) < 1e-9
        first, _ = detail_parts(panel(app, "A").view)
        assert any("saved $" in part and "vs live" in part for part in first), first


def test_the_run_detail_view_lists_each_batch_and_the_saving() -> None:
    batches = (
        BatchView("batch_a", "in_progress", 1_200, 3, 5_000, T0 - 7_200, T0 + 79_200),
        BatchView("batch_b\x1b[31m", "validating", 0, 0, 5_000, T0 - 60, None),
    )
    snap_a = snapshot("A", batches=batches, cost=4.1, cost_saved=4.1, updated_at=T0)
    snap_b = snapshot("B", cost=None)
    fields = batch_fields([snap_a, snap_b])
    assert len(fields) == 1  # B has no batches and no saving: no lines of its own
    _key, label, value = fields[0]
    assert label == "Batches of A"
    lines = value.split("\n")
    assert lines[0].startswith("2 batches: in_progress/validating 1,200/10,000 (3 failed)")
    assert "2h00m of 24h" in lines[0]
    assert (
        lines[1] == "batch_a: in_progress 1,200/5,000 (3 failed) · 2h00m of 24h · ETA 6h18m"
    )  # 2 h × 3,797 / 1,203 left
    assert lines[2].startswith("batch_b")
    assert "\x1b" not in value  # the provider's words never reach the terminal raw
    assert lines[3] == "$4.10 spent, $4.10 saved against the live price"
    # a dataset that is not a batch run has no such lines
    assert batch_fields([dataclasses.replace(snap_a, batches=(), cost_saved=None)]) == []


async def test_a_batch_run_on_a_host_shows_its_batches_and_k_says_what_it_cancels(
    sshd: Sshd, tokenizer_dir: Path, vocab_size: int, tmp_path: Path
) -> None:
    """The watcher's path: a real `gen-tui run --api openai-batch` against a real `gen-tui
    sim`, watched over a real sshd; its progress.json's batches reach the panel, and `k`
    (SIGTERM over SSH) says they are cancelled, then cancels them."""
    prompts = tmp_path / "prompts"
    write_prompts(prompts / "H.jsonl", 2000)
    out = tmp_path / "remote-out"
    out.mkdir()
    with sim_process(vocab_size) as url:
        sim_call(url, "/_sim/config", {"batch_delay_s": 30.0, "batch_validate_s": 0.0})
        args = batch_args(
            tokenizer_dir, prompts, out, url, "--max-tokens-per-dataset", "30000",
            "--batch-max-requests", "20", "--batch-in-flight", "2",
        )  # fmt: skip
        starter = SSHHost("starter", sshd.alias, str(out), options=sshd.options())
        await starter.connect()
        started = await starter.start([*GEN_TUI, *args], str(tmp_path / "run.log"))
        await starter.close()
        source = host_source(sshd.alias, str(out), options=sshd.options(), grace_s=20.0)
        app = GenTuiApp(None, hosts=[source])
        try:
            async with app.run_test(size=SIZE) as pilot:
                await wait_until(lambda: app.query(f"#{panel_id('H')}"), 60, pause=pilot.pause)
                seen = await wait_until(
                    lambda: (
                        (s := snap(app, "H"))
                        and len(s.batches) == 2
                        and all(b.completed > 0 for b in s.batches)
                        and s
                    ),
                    60,
                    pause=pilot.pause,
                )
                assert seen.pid == started.pid
                _, second = detail_parts(panel(app, "H").view)
                assert second[0].startswith("2 batches: in_progress "), second
                assert "/40" in second[0] and " of 24h" in second[0] and "ETA" in second[0]

                await pilot.press("k")
                screen = await wait_until(
                    lambda: isinstance(app.screen, ConfirmScreen) and app.screen,
                    pause=pilot.pause,
                )
                assert f"pid {started.pid}" in screen.body
                assert "Its 2 batches in flight" in screen.body, screen.body
                assert "bills the requests each finished before the cancel" in screen.body
                await pilot.press("y")
                await wait_until(lambda: not alive(started.pid), 60, pause=pilot.pause)
        finally:
            if alive(started.pid):
                os.kill(started.pid, signal.SIGKILL)
        statuses = {b["status"] for b in sim_call(url, "/_sim/batches")["batches"].values()}
    assert statuses == {"cancelled"}, statuses
