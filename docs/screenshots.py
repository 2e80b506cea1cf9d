"""Makes the docs' pictures again: the panel on the demo, and the report of that demo's run.

Run it from a clone, after `./dev.sh demo` or `./dev.sh test` made .venv:

    .venv/bin/python docs/screenshots.py

It runs the demo under Textual's Pilot (as tests/tui do) in a 120x40 terminal until
B2_opencodeinstruct has reached its budget, and saves the screen as docs/images/panel.svg,
then the command palette (ctrl+p) as docs/images/palette.svg. Then a small fleet: two
folders of this machine, "gpu-a" and "gpu-b", each written by a real `gen-tui run` process
against the simulator, watched by two links as two hosts would be: its table view, a line
per host above its datasets (`t`), as docs/images/table.svg, and the details of gpu-a's run
from the run list (`l`, `i`) as docs/images/run-detail.svg. Before the fleet, it runs
`gen-tui report --html` on the demo's output folder, and, when chromium is installed
(`apt-get install chromium`), saves the page as docs/images/report.png. Without chromium
it says so and leaves the old PNG. It took 75 to 80 s here (4 December 2026), and the
fleet about a minute more; `python docs/screenshots.py fleet` makes only the fleet's two
(a fleet run that does not come up: its log's last lines are said).
Last, the fleet plan under the header as docs/images/plan.svg: a run over two simulated
lanes (a slow free box, a fast priced API) with a deadline and a cap, and `T`'s dialog
previewing a tighter deadline (`python docs/screenshots.py plan` makes that one alone).
"""

from __future__ import annotations

import asyncio
import copy
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

from textual.widgets import Input

from gen_tui.app.cli.launch import demo_app
from gen_tui.app.engine_run import RunSource
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.config.run import DatasetSpec, EngineConfig
from gen_tui.backends.demo import build_tokenizer, write_prompts
from gen_tui.backends.sim import LengthProfile, SimConfig, SimServer
from gen_tui.widgets.dataset_panel import DatasetPanel
from gen_tui.widgets.plan_line import PlanLine

IMAGES = Path(__file__).resolve().parent / "images"
SIZE = (120, 40)
"""Roomy panels (charts) and the event log for nine datasets; 80x24 fits them compact."""
WAIT_S = 240.0
"""How long to wait for B2 to reach its budget (about a minute on an idle machine)."""
REPORT_WIDTH = 1200


async def panel(root: Path) -> None:
    """The demo's panel once B2 is done, saved as images/panel.svg, and its table view as
    images/table.svg."""
    app = demo_app(root)
    async with app.run_test(size=SIZE) as pilot:
        deadline = time.monotonic() + WAIT_S
        while not b2_done(app):
            if time.monotonic() > deadline:
                raise SystemExit(f"B2 did not reach its budget in {WAIT_S:.0f} s")
            await pilot.pause(1.0)
        await pilot.pause(2.0)  # a few more frames: rates and the event log settle
        app.save_screenshot("panel.svg", str(IMAGES))
        await pilot.press("ctrl+p")  # the command palette, its commands by name
        await pilot.pause(1.0)
        app.save_screenshot("palette.svg", str(IMAGES))


FLEET = {"gpu-a": {"A1_glaive": 400, "A2_sharegpt": 400}, "gpu-b": {"B1_magicoder": 400}}
"""The fleet scene's hosts (folders of this machine, as two SSH hosts would be watched)
and the prompts of each host's datasets."""


async def fleet(root: Path) -> None:
    """Two folders, each written by a real `gen-tui run` against the simulator and watched
    by a link of its own: the table view with a line per host (images/table.svg), then the
    run list's details of gpu-a's run (images/run-detail.svg)."""
    from gen_tui.app.host_sources import host_source
    from gen_tui.backends.tokenizer import load_tokenizer

    tokenizer = build_tokenizer(root / "tokenizer")
    vocab = len(load_tokenizer(str(tokenizer)))
    server = SimServer(
        SimConfig(
            slots=16, tokens_per_s=200, vocab_size=vocab, default_profile=LengthProfile(mean=900)
        )
    )
    url = await server.start()
    runs: list[subprocess.Popen[bytes]] = []
    try:
        for host, datasets in FLEET.items():
            prompts = root / "prompts" / host
            (root / host).mkdir()  # the links watch it from the start
            for name, count in datasets.items():
                write_prompts(prompts / f"{name}.jsonl", count)
            command = [
                sys.executable, "-m", "gen_tui.app.cli", "run", "--plain",
                "--prompts-dir", str(prompts), "--tokenizer", str(tokenizer),
                "--output-dir", str(root / host), "--server-url", url,
                "--max-tokens-per-dataset", "2M", "--concurrency", "8",
                "--parallel-datasets", str(len(datasets)),
            ]  # fmt: skip
            with open(root / f"{host}.log", "wb") as log:
                runs.append(
                    subprocess.Popen(
                        command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
                    )
                )
        hosts = [host_source("local", str(root / host), name=host) for host in FLEET]
        app = GenTuiApp(None, hosts=hosts)
        try:
            async with app.run_test(size=SIZE) as pilot:
                await until(
                    pilot,
                    lambda: fleet_running(app),
                    lambda: (
                        "every fleet dataset running; the runs' logs say:\n"
                        + "\n".join((root / f"{host}.log").read_text()[-800:] for host in FLEET)
                    ),
                )
                await pilot.pause(6.0)  # rates over a few seconds
                await pilot.press("t")
                await pilot.pause(1.0)
                app.save_screenshot("table.svg", str(IMAGES))
                await pilot.press("l")
                await pilot.pause(2.0)
                await pilot.press("i")
                await pilot.pause(1.0)
                app.save_screenshot("run-detail.svg", str(IMAGES))
        finally:
            app.stop_links()
            for link in app.links:
                link.done.wait(timeout=30)
    finally:
        for run in runs:
            run.terminate()
        for run in runs:
            run.wait(timeout=60)
        await server.stop()


async def until(pilot: Any, check: Callable[[], bool], what: Callable[[], str]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"not within {WAIT_S:.0f} s: {what()}")
        await pilot.pause(1.0)


def fleet_running(app: Any) -> bool:
    """Every fleet dataset on screen, written to by its run."""
    names = {name for datasets in FLEET.values() for name in datasets}
    running = set()
    for widget in app.query(DatasetPanel):
        snapshot = widget.view.snapshot if widget.view else None
        if snapshot is not None and str(snapshot.state) == "active" and snapshot.tokens:
            running.add(snapshot.name)
    return running == names


class FleetSource(RunSource):
    """Two simulators in the engine's loop as a run's lanes: a box and a priced API."""

    label = "in-process fleet run"

    def __init__(self, config: EngineConfig, box: SimConfig, api: SimConfig) -> None:
        super().__init__([spec.name for spec in config.datasets], grace_s=config.grace_s)
        self.config, self.box, self.api = config, box, api

    async def prepare(self, stack: AsyncExitStack) -> EngineConfig:
        box = await stack.enter_async_context(SimServer(copy.deepcopy(self.box)))
        api = await stack.enter_async_context(SimServer(copy.deepcopy(self.api)))
        lanes = [f"box={box.url}", f"api={api.url},api=openai,concurrency=16,price=0/10"]
        return replace(self.config, lanes=lanes, server_urls=[])


async def plan_shot(root: Path) -> None:
    """A fleet run's plan under the header and `T`'s preview, as images/plan.svg."""
    tokenizer = build_tokenizer(root / "tok")
    names = ("A_chat", "B_code")
    for name in names:
        write_prompts(root / "prompts" / f"{name}.jsonl", 4000)
    config = EngineConfig(
        datasets=[
            DatasetSpec(n, root / "prompts" / f"{n}.jsonl", max_tokens=400_000) for n in names
        ],
        server_urls=[],
        tokenizer=str(tokenizer),
        output_dir=root / "fleet-out",
        concurrency=8,
        model="sim-model",
        sampling={"max_new_tokens": 400},
        deadline="45m",
        max_cost=5.0,
        plan_every=10.0,
        grace_s=5.0,
        parallel_datasets=2,
    )
    profile = LengthProfile(mean=150.0, cv=0.5)
    box = SimConfig(slots=8, tokens_per_s=20, vocab_size=2000, default_profile=profile)
    api = SimConfig(
        slots=32, tokens_per_s=400, vocab_size=2000, default_profile=profile,
        cost_per_million=(0.0, 10.0),
    )  # fmt: skip
    app = GenTuiApp(FleetSource(config, box, api))
    async with app.run_test(size=(100, 30)) as pilot:
        deadline = time.monotonic() + WAIT_S
        line = app.screen.query_one("#plan", PlanLine)
        while not line.display:
            if time.monotonic() > deadline:
                raise SystemExit(f"no plan in {WAIT_S:.0f} s")
            await pilot.pause(1.0)
        await pilot.pause(3.0)
        await pilot.press("T")
        await pilot.pause(0.5)
        app.screen.query_one("#plan-target", Input).value = "10m 5"
        await pilot.pause(1.0)
        app.save_screenshot("plan.svg", str(IMAGES))


def b2_done(app: object) -> bool:
    for widget in app.query(DatasetPanel):  # type: ignore[attr-defined]
        snapshot = widget.view.snapshot if widget.view else None
        if snapshot is not None and snapshot.name.startswith("B2"):
            return str(snapshot.state) == "done"
    return False


def report(root: Path) -> None:
    """`gen-tui report --html` of the demo's output, as images/report.png through chromium."""
    page = root / "report.html"
    gen_tui = Path(sys.executable).with_name("gen-tui")
    output = root / "output"
    subprocess.run([gen_tui, "report", "--output-dir", output, "--html", page], check=True)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("no chromium: docs/images/report.png left as it was", file=sys.stderr)
        return
    subprocess.run(
        [
            chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            f"--screenshot={IMAGES / 'report.png'}", f"--window-size={REPORT_WIDTH},2150",
            page.as_uri(),
        ],
        check=True, capture_output=True,
    )  # fmt: skip


def main() -> None:
    """Every picture; `fleet` or `plan` as the argument: only that scene's."""
    IMAGES.mkdir(exist_ok=True)
    only = sys.argv[1] if sys.argv[1:] in (["fleet"], ["plan"]) else None
    if only is None:
        with tempfile.TemporaryDirectory(prefix="gen-tui-shots-") as tmp:
            asyncio.run(panel(Path(tmp)))
            report(Path(tmp))
    if only in (None, "fleet"):
        with tempfile.TemporaryDirectory(prefix="gen-tui-shots-") as tmp:
            asyncio.run(fleet(Path(tmp)))
    if only in (None, "plan"):
        with tempfile.TemporaryDirectory(prefix="gen-tui-shots-") as tmp:
            asyncio.run(plan_shot(Path(tmp)))
    names = ("panel.svg", "palette.svg", "table.svg", "run-detail.svg", "report.png", "plan.svg")
    for name in names:
        path = IMAGES / name
        if path.exists():
            print(f"{path}: {path.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
