"""The demo's local host: the runs the demo started itself, and nothing else on the machine.

A plain local host lists every `gen-tui run` and `run_inference` process on the machine, so
the demo's `l` and `k` once offered other people's jobs on a shared GPU box (and one was
killed from the demo). The demo's host narrows that twice: its survey matches only command
lines writing into the demo's own output folder, and of those it keeps only the processes
this host started (by identity: pid, start time and command line, so a reused pid is not
one of them). A kill or a resume of anything else is refused, and a resume by dataset name
restarts the demo's own command line, never one another process showed.

Imported in the link's worker, never at startup.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from gen_tui.backends.hosts import (
    DEFAULT_PATTERN,
    START_SETTLE_S,
    KillOutcome,
    LocalHost,
    RunError,
    RunIdentity,
    RunProcess,
    Survey,
    TickCallback,
)
from gen_tui.backends.settings import DEFAULT_GRACE_S


def own_pattern(output_dir: Path) -> str:
    """The default run pattern, and `--output-dir` naming `output_dir` (as given or resolved)."""
    folders = {str(output_dir), str(output_dir.expanduser().resolve())}
    folder = "|".join(re.escape(name) for name in sorted(folders))
    return rf"^(?=.*(?:{DEFAULT_PATTERN})).*\s--output-dir[\s=](?:{folder})/?(\s|$)"


class OwnRunsHost(LocalHost):
    """This machine, limited to the runs this host itself started in `output_dir`."""

    def __init__(self, output_dir: Path, name: str = "local") -> None:
        super().__init__(output_dir, name=name, pattern=own_pattern(output_dir))
        self.own: tuple[RunIdentity, ...] = ()
        """Every process this host started (the demo's stale run and its resumes)."""

    def is_own(self, identity: RunIdentity) -> bool:
        return any(identity.same_process(own) for own in self.own)

    async def survey(self, pattern: str | None = None) -> Survey:
        survey = await super().survey(pattern)
        return replace(survey, runs=tuple(r for r in survey.runs if self.is_own(r.identity)))

    async def start(
        self,
        command_argv: Sequence[str],
        log_path: str,
        cwd: str | None = None,
        settle_s: float = START_SETTLE_S,
        *,
        output_dir: str | None = None,
        expect: int | None = None,
        env: dict[str, str] | None = None,
        exit_file: str | None = None,
    ) -> RunIdentity:
        identity = await super().start(
            command_argv,
            log_path,
            cwd,
            settle_s,
            output_dir=output_dir,
            expect=expect,
            env=env,
            exit_file=exit_file,
        )
        self.own = (*self.own, identity)
        return identity

    async def kill(
        self,
        identity: RunIdentity,
        grace_s: float = DEFAULT_GRACE_S,
        on_tick: TickCallback | None = None,
        files: Sequence[str] | None = None,
    ) -> KillOutcome:
        if not self.is_own(identity):
            raise RunError(f"pid {identity.pid} is not a run the demo started; it is left alone")
        return await super().kill(identity, grace_s, on_tick, files)

    async def resume(
        self,
        run_or_dataset: RunProcess | str,
        new_max_tokens: int | None,
        *,
        max_samples: int | None = None,
        datasets: Sequence[str] | None = None,
        log_path: str | None = None,
    ) -> RunIdentity:
        """Start one of the demo's own runs again; by dataset name, the last one writing it."""
        if isinstance(run_or_dataset, RunProcess):
            run = run_or_dataset
            if not self.is_own(run.identity):
                raise RunError(f"pid {run.pid} is not a run the demo started; nothing was started")
        else:
            name = run_or_dataset
            known = (self.known_run(identity) for identity in reversed(self.own))
            found = next((r for r in known if r is not None and name in r.datasets), None)
            if found is None:
                raise RunError(f"{name}: no run the demo started writes it; nothing was started")
            run, datasets = found, (name,) if datasets is None else datasets
        return await super().resume(
            run,
            new_max_tokens,
            max_samples=max_samples,
            datasets=datasets,
            log_path=log_path,
        )
