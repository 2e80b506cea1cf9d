"""`gen-tui --demo`: eight datasets on the built-in simulator, prepared in the engine's thread.

Everything lives in one temporary folder that `main` removes on exit: a tokenizer trained
offline, B1..B8 prompt files and the output. The simulator is started inside the engine
worker's own event loop (never on Textual's), and stops with it.
"""

from __future__ import annotations

import asyncio
import copy
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from gen_tui.app.engine_run import Calibration, RunSource
from gen_tui.app.host_sources import HostSource
from gen_tui.backends import demo
from gen_tui.backends.config.run import DatasetSpec, EngineConfig, EngineHooks, queued_concurrency
from gen_tui.backends.demo import DEMO_DATASETS, STAR, DemoDataset
from gen_tui.backends.figures import format_count
from gen_tui.backends.progress.snapshot import DatasetState, RunSnapshot

if TYPE_CHECKING:  # the simulator (aiohttp.web) is imported in the worker, not at startup
    from gen_tui.app.demo_host import OwnRunsHost
    from gen_tui.backends.hosts import RunIdentity
    from gen_tui.backends.sim import SimConfig


STALE = "B9_stale"
"""The demo's separate `gen-tui run` process: no token budget, a slow server, for `k` and `r`."""
STALE_PROMPTS = 400
STALE_MEAN_TOKENS = 4000.0
STALE_TOKENS_PER_S = 1.0
"""Per slot, one slot, every answer STALE_MEAN_TOKENS long: its first answer would take over
an hour, so it writes no record and is stale from DEMO_STALE_AFTER_S after its start until
`k` stops it. At 50 tok/s it wrote one every 80 s and flipped between running and stale,
so `k` on a stale run had to be timed (issue 31, the user's story)."""
STALE_GRACE_S = 10.0
"""Its drain on `k` (`--grace`, and its link's): one figure, said alike by the kill's
question and the event log's outcome."""
STORY_START = 5_000_000
"""B2's budget in the panel's demo: it stops there ("budget reached"), and the user's story
is `r` with 10M (its catalogue budget, the headless demo's) to see it cross 10M live."""


def story(budget: int) -> str:
    """The demo's note: the user's story, with the budget B2 stops at (STORY_START, or
    what the demo scaled it to on a slow machine: the note said 5M beside a panel's 2.5M).
    Within 78 columns, the note's room at 80: it was cut at "B2 stops at 5…"."""
    return (
        f"demo: k stops {STALE} once stale · B2 stops at {format_count(budget)}: "
        "r 10M takes it past 10M"
    )


SIM_SLOTS = 128
SIM_TOKENS_PER_S = 50_000.0
"""Per slot: 128 x 4000 = 512k tok/s offered, about what one core serves (engine + simulator)."""
TARGET_S = 60.0
WARMUP_S = 15.0
SETTLE_S = 35.0
CALIBRATION_WINDOW_S = 8.0
GPU_TELEMETRY = (
    "simulated (demo): the GPU strip follows this demo's simulated server, through a "
    "stand-in nvidia-smi"
)
"""What the demo's run says of its GPUs: the strip's are simulated (sim/nvidia_smi.py), and
this machine's (none, most likely) are not read."""


class DemoSource(RunSource):
    """The demo: tokenizer, prompts and simulator built on first use inside the worker."""

    label = "demo run"

    def __init__(self, root: Path, datasets: tuple[DemoDataset, ...] = DEMO_DATASETS) -> None:
        super().__init__([d.name for d in datasets], grace_s=30.0)
        self.root = root
        self.removed_on_exit = root  # `main` removes it (run_dashboard_demo)
        self.datasets = datasets
        self.budgets = {d.name: d.budget for d in datasets}
        if STAR in self.budgets:  # the story's start: below the 10M `r` sets
            self.budgets[STAR] = min(STORY_START, self.budgets[STAR])
        self.notice = story(self.budgets[STAR])
        self._lock = threading.Lock()
        self._tokenizer_lock = threading.Lock()
        self._prompts: dict[str, Path] | None = None
        self.calibrated = False
        self._marks: list[tuple[float, int]] = []
        self._checked = 0.0
        self.scale = 1.0
        self.original = self.budgets[STAR]

    @property
    def gpu_urls(self) -> Path:
        """The servers the demo's simulated GPUs follow (see sim/nvidia_smi.py)."""
        return self.root / "gpu-servers"

    def tokenizer(self) -> Path:
        """The demo's tokenizer, built once whichever thread asks first."""
        with self._tokenizer_lock:
            return demo.build_tokenizer(self.root / "tokenizer")

    def _write_prompts(self) -> dict[str, Path]:
        with self._lock:
            if self._prompts is None:
                self._prompts = demo.write_demo_prompts(self.root / "prompts", self.datasets)
            return self._prompts

    def sim_config(self) -> SimConfig:
        from gen_tui.backends.sim import LengthProfile, SimConfig

        return SimConfig(
            slots=SIM_SLOTS,
            tokens_per_s=SIM_TOKENS_PER_S,
            prefill_s=0.05,
            profiles={d.name: LengthProfile(mean=d.mean_tokens) for d in self.datasets},
            vocab_size=demo.vocab_size(self.tokenizer()),  # the answers' ids are its ids
            measured_throughput=True,  # what it generates, as the header says what arrives
        )

    async def prepare(self, stack: AsyncExitStack) -> EngineConfig:
        loop = asyncio.get_running_loop()
        tokenizer = await loop.run_in_executor(None, self.tokenizer)
        prompts = await loop.run_in_executor(None, self._write_prompts)
        from gen_tui.backends.sim import SimServer

        server = await stack.enter_async_context(SimServer(self.sim_config()))
        self.gpu_urls.write_text(server.url + "\n")  # what the simulated GPUs follow
        return EngineConfig(
            datasets=[
                DatasetSpec(d.name, prompts[d.name], max_tokens=self.budgets[d.name])
                for d in self.datasets
            ],
            server_urls=[server.url],
            tokenizer=str(tokenizer),
            output_dir=self.root / "output",
            concurrency=queued_concurrency(SIM_SLOTS),
            sampling={"max_new_tokens": 16384, "temperature": 0.7},
            parallel_datasets=len(self.datasets),
            grace_s=self.grace_s,
            hooks=EngineHooks(gpu_telemetry=GPU_TELEMETRY),
        )

    def calibrate(self, snapshot: RunSnapshot, elapsed_s: float) -> Calibration | None:
        """Scale budgets down, if need be, so the star crosses about a minute in.

        Called a few times a second while the run goes. From WARMUP_S to SETTLE_S it
        measures the star's speed over the last CALIBRATION_WINDOW_S (the engine's own rate
        averages from the first record, ramp-up included) and, whenever the crossing is
        projected later than a minute and a quarter, lowers every budget in proportion.
        `elapsed_s` counts from the start of the run, tokenizer build included: "about a
        minute" is what the person watching experiences.
        """
        if self.calibrated or elapsed_s > SETTLE_S:
            return None
        star = next((d for d in snapshot.datasets if d.name == STAR), None)
        if star is None or star.state is not DatasetState.ACTIVE or star.max_tokens is None:
            return None
        if star.max_tokens != self.budgets[STAR]:  # set with `r`: the user's, never scaled
            self.calibrated = True
            return None
        self._marks.append((elapsed_s, star.tokens))
        if elapsed_s < WARMUP_S or elapsed_s - self._checked < CALIBRATION_WINDOW_S:
            return None
        window = CALIBRATION_WINDOW_S
        since, tokens = next(
            ((t, n) for t, n in self._marks if elapsed_s - t <= window), self._marks[0]
        )
        if elapsed_s - since < CALIBRATION_WINDOW_S / 2 or star.tokens <= tokens:
            return None
        self._checked = elapsed_s
        rate = (star.tokens - tokens) / (elapsed_s - since)
        projected = elapsed_s + (star.max_tokens - star.tokens) / rate
        if projected <= TARGET_S * 1.25:
            return None
        reachable = star.tokens + rate * max(TARGET_S - elapsed_s, 15.0)
        step = 500_000
        new = max(step, int(reachable // step) * step)
        if new >= star.max_tokens:
            return None
        factor = new / star.max_tokens
        budgets = {STAR: new}
        for d in snapshot.datasets:
            if d.name != STAR and d.max_tokens is not None and not d.state.finished:
                budgets[d.name] = max(step // 5, int(round(d.max_tokens * factor, -5)))
        self.budgets.update(budgets)
        self.scale *= factor
        self.calibrated = True
        return Calibration(
            budgets,
            story(new),
            f"budgets {self.scale:.0%}: slow machine",
            f"demo: budgets scaled to {self.scale:.0%} to fit this machine "
            f"(B2: {format_count(self.original)} → {format_count(new)} "
            f"at {format_count(float(f'{rate:.3g}'))} tok/s)",
        )


class SimProcessSource(HostSource):
    """A separate local `gen-tui run` process writing one dataset against its own simulator.

    The simulator lives in the host link's loop, so a resumed run (the same command line
    with a new budget) finds it at the same URL. The process is the app's own: it is
    stopped when the app exits. The host watches only what it started itself
    (`demo_host.OwnRunsHost`): other runs on the machine are never listed, stopped or
    restarted from here.
    """

    owns_runs = True

    def __init__(
        self,
        dataset: str,
        output_dir: Path,
        sim: SimConfig | Callable[[], SimConfig],
        files: Callable[[], tuple[Path, Path]],
        run_args: Sequence[str] = (),
        grace_s: float = 30.0,
        gpu_urls: Path | None = None,
    ) -> None:
        # This machine by the name the demo's in-process run gives it (the engine's
        # snapshots say socket.gethostname()): "local" beside it named one machine twice.
        super().__init__(
            datasets=[dataset], discover=False, grace_s=grace_s, label=socket.gethostname()
        )
        self.dataset = dataset
        self.output_dir = output_dir
        self.sim = sim
        self.files = files
        self.run_args = tuple(run_args)
        self.gpu_urls = gpu_urls
        """Simulated GPUs for this host's watcher, following the servers listed there."""
        self.launched: RunIdentity | None = None

    async def open(self, stack: AsyncExitStack) -> OwnRunsHost:
        from gen_tui.app.demo_host import OwnRunsHost
        from gen_tui.backends.sim import SimServer

        loop = asyncio.get_running_loop()
        prompts_dir, tokenizer = await loop.run_in_executor(None, self.files)
        sim = self.sim() if callable(self.sim) else copy.deepcopy(self.sim)
        server = await stack.enter_async_context(SimServer(sim))
        self.output_dir.mkdir(parents=True, exist_ok=True)
        host = OwnRunsHost(self.output_dir, self.label)
        if self.gpu_urls is not None:
            from gen_tui.backends.sim.nvidia_smi import write_standin

            folder = self.output_dir.parent / "simulated-gpus"
            host.watcher_path = [str(await asyncio.to_thread(write_standin, folder, self.gpu_urls))]
        argv = [
            *(sys.executable, "-m", "gen_tui.app.cli", "run"),
            *("--prompts-dir", str(prompts_dir), "--tokenizer", str(tokenizer)),
            *("--output-dir", str(self.output_dir), "--server-url", server.url),
            *("--plain", "--datasets", self.dataset, *self.run_args),
        ]
        # Its log among the output folder's start logs, where `L` finds an ended run's (and
        # `r` and `s` put theirs): beside the output folder, `L` after `k` found none.
        from gen_tui.backends.hosts.resume import resume_log_path

        log = resume_log_path(str(self.output_dir), self.dataset)
        # in the demo's own folder: `-m` puts the working folder first on sys.path, and the
        # folder gen-tui was started in may be a shared one (the start refuses that)
        self.launched = await host.start(argv, log, cwd=str(self.output_dir.parent))
        return host


def stale_source(main: DemoSource) -> SimProcessSource:
    """The demo's stale run: B9 with no token budget, one slow slot, sharing the tokenizer."""

    def files() -> tuple[Path, Path]:
        folder = main.root / "prompts-stale"
        demo.write_prompts(folder / f"{STALE}.jsonl", STALE_PROMPTS, "messages")
        return folder, main.tokenizer()

    def sim() -> SimConfig:  # built in the link's worker: the simulator imports aiohttp
        from gen_tui.backends.sim import LengthProfile, SimConfig

        return SimConfig(
            slots=1,
            tokens_per_s=STALE_TOKENS_PER_S,
            default_profile=LengthProfile(mean=STALE_MEAN_TOKENS, cv=0.0),
            vocab_size=demo.vocab_size(main.tokenizer()),
        )

    return SimProcessSource(
        STALE,
        main.root / "output",
        sim,
        files,
        ("--concurrency", "1", "--max-new-tokens", "16384", "--grace", f"{STALE_GRACE_S:g}"),
        grace_s=STALE_GRACE_S,
        gpu_urls=main.gpu_urls,
    )
