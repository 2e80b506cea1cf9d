"""The fleet plan on the panel under Pilot (issue 34): a run this process hosts over two
simulated lanes (a slow free box, a fast priced API) with a deadline and a cap. The plan
line appears under the header once the run has planned (hidden before), `T` opens the
deadline-and-cap dialog, which checks its one line as it is typed and previews the plan the
new target makes before anything is applied; Enter hands it to the engine, which re-plans
at once, and the line shows the new plan, flagged when it misses its deadline or cap.
"""

from __future__ import annotations

import copy
import subprocess
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import replace
from pathlib import Path

from textual.widgets import Input, Label

from bench.common import simulator
from gen_tui.app.dashboard.keys import CONTROL_ACTIONS, DASHBOARD_KEYS, help_rows
from gen_tui.app.dialogs.plan_target import PlanTargetScreen
from gen_tui.app.engine_run import RunSource
from gen_tui.app.host_sources import host_source
from gen_tui.app.tui import GenTuiApp
from gen_tui.backends.config.run import DatasetSpec, EngineConfig
from gen_tui.backends.demo import write_prompts
from gen_tui.backends.plan.control import CONTROL_FILE
from gen_tui.backends.sim import LengthProfile, SimConfig, SimServer
from gen_tui.widgets.plan_line import PlanLine
from tests.support.polling import wait_until
from tests.support.run_output import ENV, GEN_TUI
from tests.support.tui import SIZE, panel, snap

BUDGET = 8_000  # 40 s on the box alone


class FleetSource(RunSource):
    """Two simulators in the engine's loop, as the run's lanes."""

    label = "in-process fleet run"

    def __init__(self, config: EngineConfig, box: SimConfig, api: SimConfig) -> None:
        super().__init__([spec.name for spec in config.datasets], grace_s=config.grace_s)
        self.config, self.box, self.api = config, box, api

    async def prepare(self, stack: AsyncExitStack) -> EngineConfig:
        box = await stack.enter_async_context(SimServer(copy.deepcopy(self.box)))
        api = await stack.enter_async_context(SimServer(copy.deepcopy(self.api)))
        lanes = [f"box={box.url}", f"api={api.url},api=openai,concurrency=16,price=0/10"]
        return replace(self.config, lanes=lanes, server_urls=[])


def fleet_app(
    tmp_path: Path, tokenizer_dir: Path, prompts_dir: Callable[..., Path], vocab_size: int
) -> GenTuiApp:
    folder = prompts_dir(A=BUDGET // 20)
    config = EngineConfig(
        datasets=[DatasetSpec("A", folder / "A.jsonl", max_tokens=BUDGET)],
        server_urls=[],
        tokenizer=str(tokenizer_dir),
        output_dir=tmp_path / "out",
        concurrency=4,
        model="sim-model",
        sampling={"max_new_tokens": 200},
        deadline="30m",
        max_cost=0.5,
        plan_every=30.0,
        grace_s=5.0,
    )
    profile = LengthProfile(mean=50.0, cv=0.3)
    box = SimConfig(slots=4, tokens_per_s=50, vocab_size=vocab_size, default_profile=profile)
    api = SimConfig(
        slots=32,
        tokens_per_s=200,
        vocab_size=vocab_size,
        default_profile=profile,
        cost_per_million=(0.0, 10.0),
    )
    return GenTuiApp(FleetSource(config, box, api))


def line_of(app: GenTuiApp) -> PlanLine:
    return app.screen.query_one("#plan", PlanLine)


def drawn(line: PlanLine) -> str:
    return line.render().plain


async def test_the_plan_line_and_t_change_a_hosted_runs_deadline_live(
    tmp_path: Path, tokenizer_dir: Path, prompts_dir: Callable[..., Path], vocab_size: int
) -> None:
    app = fleet_app(tmp_path, tokenizer_dir, prompts_dir, vocab_size)
    async with app.run_test(size=SIZE) as pilot:
        dashboard = app.screen
        line = line_of(app)
        assert not line.display  # no plan yet: nothing under the header
        # Shown and laid out (under load a layout pass can come after the display flips).
        await wait_until(lambda: line.display and line.region, pause=pilot.pause, timeout=60)
        text = drawn(line)
        assert text.startswith("plan box "), text
        assert " · finish " in text and "of $0.500 · deadline " in text, text
        assert " api " not in text  # the box alone meets 30 minutes: no tokens bought
        assert not line.has_class("-flagged")
        # Under the header, above the panels: the line the header leaves.
        assert line.region.y == 1 and line.region.height == 1

        await pilot.press("T")
        dialog = await wait_until(
            lambda: isinstance(app.screen, PlanTargetScreen) and app.screen, pause=pilot.pause
        )
        field = dialog.query_one("#plan-target", Input)
        assert field.value.endswith(" 0.5"), field.value  # the current deadline and cap
        field.value = "soon 0.4"
        await pilot.pause()
        error = str(dialog.query_one("#plan-error", Label).render())
        assert "deadline 'soon': expected a time of day" in error, error
        assert "\n" not in error
        field.value = "12s 0.4"
        await pilot.pause()
        assert str(dialog.query_one("#plan-error", Label).render()) == ""
        preview = str(dialog.query_one("#plan-preview", Label).render())
        assert preview.startswith("would be: box ") and " api " in preview, preview
        assert "of $0.400" in preview, preview
        # Nothing applied before Enter: the run's plan is still the old one.
        now = snap(app, "A")
        assert now is not None and now.plan is not None and now.plan.max_cost == 0.5
        await pilot.press("enter")
        assert app.screen is dashboard

        def replanned() -> bool:
            shown = snap(app, "A")
            return bool(shown and shown.plan and shown.plan.max_cost == 0.4)

        await wait_until(replanned, pause=pilot.pause, timeout=10)
        await wait_until(lambda: " api " in drawn(line), pause=pilot.pause, timeout=5)
        assert "of $0.400" in drawn(line), drawn(line)

        # A target the cap cannot meet: flagged, with the planner's reason.
        await pilot.press("T")
        dialog = await wait_until(
            lambda: isinstance(app.screen, PlanTargetScreen) and app.screen, pause=pilot.pause
        )
        dialog.query_one("#plan-target", Input).value = "2s 0.0001"
        await pilot.pause()
        await pilot.press("enter")
        await wait_until(lambda: line.has_class("-flagged"), pause=pilot.pause, timeout=10)
        assert "the best finish is" in drawn(line) or "cap buys" in drawn(line), drawn(line)


async def test_t_on_a_watched_headless_run_writes_its_control_file_and_it_replans(
    tmp_path: Path, tokenizer_dir: Path, vocab_size: int
) -> None:
    """The same over a real `gen-tui run` in its own process, which the panel only watches
    (its local link, as for a run over SSH): the plan comes from its progress.json, and `T`
    reaches it as the control file the link writes into its folder."""
    write_prompts(tmp_path / "prompts" / "A.jsonl", BUDGET // 20)
    out = tmp_path / "out"
    vocab = ("--vocab-size", str(vocab_size), "--default-mean", "50", "--default-cv", "0.3")
    with (
        simulator(*vocab, "--slots", "4", "--tokens-per-s", "50") as box,
        simulator(*vocab, "--slots", "32", "--tokens-per-s", "200", "--cost", "0,10") as api,
    ):
        args = [
            "run", "--plain", "--prompts-dir", str(tmp_path / "prompts"),
            "--tokenizer", str(tokenizer_dir), "--output-dir", str(out),
            "--lane", f"box={box}", "--lane", f"api={api},api=openai,concurrency=16,price=0/10",
            "--concurrency", "4", "--max-tokens-per-dataset", str(BUDGET),
            "--max-new-tokens", "200", "--deadline", "30m", "--max-cost", "0.5",
            "--plan-every", "30", "--model", "sim-model",
        ]  # fmt: skip
        run = subprocess.Popen(
            [*GEN_TUI, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=ENV
        )
        try:
            local = host_source(None, str(out), datasets=["A"], discover=False)
            app = GenTuiApp(None, hosts=[local])
            async with app.run_test(size=SIZE) as pilot:
                line = line_of(app)
                await wait_until(lambda: line.display, pause=pilot.pause, timeout=60)
                assert drawn(line).startswith("plan box "), drawn(line)
                assert " api " not in drawn(line)
                panel(app, "A").focus()
                await pilot.press("T")
                dialog = await wait_until(
                    lambda: isinstance(app.screen, PlanTargetScreen) and app.screen,
                    pause=pilot.pause,
                )
                where = str(dialog.query_one("#plan-where", Label).render())
                assert f"pid {run.pid} on local" in where, where
                dialog.query_one("#plan-target", Input).value = "12s 0.4"
                await pilot.pause()
                await pilot.press("enter")
                await wait_until(
                    lambda: " api " in drawn(line) and "of $0.400" in drawn(line),
                    pause=pilot.pause,
                    timeout=20,
                )
            assert (out / "A" / CONTROL_FILE).is_file()
        finally:
            run.kill()
            run.wait(timeout=10)


def test_help_lists_t_and_readonly_turns_it_off() -> None:
    rows = {row.key: (row.description, row.detail) for row in help_rows(DASHBOARD_KEYS)}
    description, tooltip = rows["T"]
    assert description == "Deadline & cap" and "previewed" in tooltip
    assert "plan" in CONTROL_ACTIONS
