"""A host: list, stop, start, resume and watch runs, written once over a few primitives.

A run is a process whose command line matches the host's pattern: gen-tui's own engine or a
user's `python run_inference.py ...`. Both are listed and controlled alike, as long as they
write the record layout of `records.py`. :class:`Host` holds every algorithm; the local and
the SSH host (`local.py`, `ssh.py`) only say how to run the watcher, a shell script and a
detached start on their machine. Every value that reaches a shell is `shlex.quote`d, and
dataset names pass :func:`check_dataset_name` before anything runs.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Callable, Mapping, Sequence

from gen_tui.backends import watcher
from gen_tui.backends.hosts.argv import template_argv
from gen_tui.backends.hosts.connection import describe
from gen_tui.backends.hosts.errors import RunError
from gen_tui.backends.hosts.kill import (
    KILL_WAIT_S,
    KillOutcome,
    TickCallback,
)
from gen_tui.backends.hosts.primitives import HostPrimitives
from gen_tui.backends.hosts.ps import (
    RunIdentity,
    RunProcess,
    Survey,
    unknown_folder,
)
from gen_tui.backends.hosts.resume import (
    check_budget,
    edited_command,
    refuse_live_writers,
    resume_log_path,
)
from gen_tui.backends.hosts.scripts import rquote
from gen_tui.backends.hosts.ssh_target import SSHError
from gen_tui.backends.hosts.start import START_SETTLE_S, start_run
from gen_tui.backends.hosts.stop import stop_run
from gen_tui.backends.hosts.watch import Watch
from gen_tui.backends.plan.control import CONTROL_FILE, PlanTarget, parse_target, target_text
from gen_tui.backends.settings import DEFAULT_GRACE_S
from gen_tui.backends.store.prompt_heads import PROMPT_HEAD_CHARS, PROMPT_SCAN_BYTES, PromptHeads
from gen_tui.backends.store.prompts import check_dataset_name
from gen_tui.backends.store.tails import (
    HISTORY_TAIL_LINES,
    Tail,
    history_spec,
    log_spec,
    record_spec,
)

ResumePreview = tuple[Callable[[int | None], list[str]] | None, str | None]


class Host(HostPrimitives):
    """A machine whose runs gen-tui lists and controls: `LocalHost` or `SSHHost`.

    A subclass supplies the abstract primitives (`primitives.py`: the watcher's process
    listing, a shell script run to its end or read line by line, a guarded detached start,
    the watcher's stream); everything a person asks of a host is written here once, so the
    two hosts cannot drift apart.
    """

    # the ends of files

    async def tail_records(self, dataset: str, count: int) -> Tail:
        """The last `count` whole records of `dataset`, read from the end of its file."""
        check_dataset_name(dataset)
        spec = record_spec(self._abs_output_dir(), dataset, count)
        return Tail.parse(await self._tail_raw(spec), count)

    async def tail_history(self, dataset: str) -> Tail:
        """The end of `dataset`'s history file (the plot view's points), bounded."""
        check_dataset_name(dataset)
        spec = history_spec(self._abs_output_dir(), dataset)
        return Tail.parse(await self._tail_raw(spec), HISTORY_TAIL_LINES)

    async def prompt_heads(self, dataset: str, keys: Sequence[str]) -> PromptHeads:
        """The prompt heads of `dataset`'s samples `keys`, looked up on the host in the
        prompt file its manifest (or its writer's command line) names, bounded."""
        check_dataset_name(dataset)
        run = self._by_dataset.get(dataset)
        spec = {
            "output_dir": self._abs_output_dir(),
            "dataset": dataset,
            "pid": run.pid if run else None,
            "keys": list(keys)[: watcher.MAX_HEAD_KEYS],
            "max_bytes": PROMPT_SCAN_BYTES,
            "chars": PROMPT_HEAD_CHARS,
        }
        return PromptHeads.of_report(await self._heads_raw(spec))

    async def tail_log(self, dataset: str, lines: int) -> Tail:
        """The end of the log of the run writing `dataset` (or of its last start)."""
        check_dataset_name(dataset)
        run = self._by_dataset.get(dataset)
        spec = log_spec(self._abs_output_dir(), dataset, run.pid if run else None, lines)
        return Tail.parse(await self._tail_raw(spec), lines)

    # list

    async def survey(self, pattern: str | None = None) -> Survey:
        """The runs, and the dataset folders of the host's output directory, in one look."""
        report = await self._ps(pattern or self.pattern, self.output_dir)
        runs = sorted(self._runs_from_report(report), key=lambda run: run.identity.start_time)
        out_dir = report.output_dir or self._abs_output_dir()
        problem = report.output_dir_problem
        return Survey(
            tuple(runs),
            out_dir,
            tuple(report.folder(out_dir)),
            f"output folder {out_dir} {problem}" if problem else None,
        )

    # kill

    async def kill(
        self,
        identity: RunIdentity,
        grace_s: float = DEFAULT_GRACE_S,
        on_tick: TickCallback | None = None,
        files: Sequence[str] | None = None,
    ) -> KillOutcome:
        """SIGTERM the run's group, wait up to `grace_s` (ticking), then SIGKILL; verify.

        The identity is checked right before each signal. `files` are the record files to
        watch stop growing (default: those of the datasets the run list gave it). The
        algorithm is :func:`stop.stop_run`, over this host's primitives.
        """
        if identity.host != self.name:
            raise RunError(f"run {identity.pid} belongs to host {identity.host}, not {self.name}")
        return await stop_run(self, identity, grace_s, on_tick, files)

    async def kill_now(self, identity: RunIdentity) -> str:
        """SIGKILL the run's group at once (identity-checked), no drain; the verdict
        ("gone", "absent", ...). For leaving now a run this session itself started, whose
        drain the user chose not to wait for (`q` twice): `kill` would wait out its grace."""
        if identity.host != self.name:
            raise RunError(f"run {identity.pid} belongs to host {identity.host}, not {self.name}")
        verdict, _ = await self._signal_wait(identity, "KILL", KILL_WAIT_S, None)
        return verdict

    # start

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
        """Launch detached (own session, output to `log_path`); return the new identity.

        The launch happens under the output folder's start guard: `expect` is the folder's
        start count as read by the check for a live writer this start relies on, and a start
        that finds it moved (another start came after that check) is refused. Waits until the
        pid runs the command itself (not the env, setsid or nohup it begins with) and is still
        alive `settle_s` after the launch, so a command that dies at once (a typo, a missing
        file) is reported with the end of its log instead of being listed as a run. `env` is
        added to the host's environment for the command. With `exit_file`, a shell runs
        the command and writes its exit status there (the identity is that shell's, the
        leader of the command's session).
        """
        return await start_run(
            self, command_argv, log_path, cwd, settle_s, output_dir, expect, env, exit_file
        )

    # any process (the servers gen-tui starts: backends/servers)

    async def identify(self, pid: int) -> RunIdentity | None:
        """Who `pid` is now (pid, start time, boot, command line), None when it is gone."""
        report = await self._ps(self.pattern, None, pids=[pid])
        proc = report.procs[0] if report.procs else None
        if proc is None or proc.gone:
            return None
        return proc.identity(self.name, report.boot_id)

    async def log_lines(self, path: str, lines: int = 20) -> list[str]:
        """The last `lines` lines of the file at `path` on the host (bounded, cleaned)."""
        report = Tail.parse(await self._tail_raw({"path": path, "max_bytes": 4000}), lines)
        return [report.error] if report.error else list(report.lines)

    async def make_folder(self, path: str) -> None:
        """Make the folder at `path` on the host (and those above it), yours alone (0700):
        the start guard refuses a folder that does not exist yet."""
        await self._sh(f"umask 077 && mkdir -p -- {rquote(path)}")

    async def put_small_file(self, folder: str, name: str, text: str) -> str:
        """Write `text` (a few hundred bytes) as `name` in `folder` on the host (made 0700
        when missing), whole: a fresh temporary file there, then renamed. Its path."""
        path = posixpath.join(folder, name)
        pattern = posixpath.join(folder, f".{name}.XXXXXX")
        await self._sh(
            "\n".join(
                [
                    "umask 077",
                    "set -e",
                    f"mkdir -p -- {rquote(folder)}",
                    f"tmp=$(mktemp -- {rquote(pattern)})",
                    f'printf \'%s\' {shlex.quote(text)} > "$tmp" && mv -f -- "$tmp" {rquote(path)}',
                ]
            )
        )
        return path

    async def put_drain_notice(self, folder: str, name: str, text: str) -> str:
        """Write the drain notice `text` (backends/drain_notice.py) as `name` in `folder`
        on the host, whole. Here as it was written: its writer is this process (an SSH
        host names the process that carries the link instead). Its path."""
        return await self.put_small_file(folder, name, text)

    async def remove_drain_notice(self, folder: str, name: str) -> None:
        """Remove the drain notice `name` in `folder` (its drain ended): nothing when it
        is absent. An SSH host no longer writes it again on a reconnect."""
        await self.remove_file(posixpath.join(folder, name))

    async def remove_file(self, path: str) -> None:
        """Remove the file at `path` on the host (nothing when it is absent)."""
        await self._sh(f"rm -f -- {rquote(path)}")

    async def touch_file(self, path: str, timeout: float = 60.0) -> None:
        """Set the time of the file at `path` on the host to now (nothing when absent)."""
        await self._sh(f"touch -c -- {rquote(path)}", timeout)

    async def file_size(self, path: str) -> int | None:
        """The size of the file at `path` on the host now (None: absent or unreadable)."""
        return (await self._sizes([path], samples=1))[-1].get(path)

    async def write_plan_target(self, run: RunProcess, target: PlanTarget) -> str:
        """Give `run` a new deadline and cap: its plan control file, written into each of its
        dataset folders (its planner reads the newest at its next look, within a second or
        two). Atomic: a temporary file of the run's folder, then renamed over the old one.
        Every value is quoted; the content is the target's JSON, checked before it is sent.
        Returns the first path written."""
        parse_target(target.to_json())  # what the run will accept, or ControlError here
        text = target_text(target)
        paths = []
        lines = ["umask 077", "set -e"]
        if run.output_dir is None:
            raise RunError(unknown_folder(run, "no plan was written"))
        for dataset in run.datasets:
            folder = posixpath.join(run.output_dir, check_dataset_name(dataset))
            path = posixpath.join(folder, CONTROL_FILE)
            # A fresh temporary name (mktemp: O_EXCL), never one a link planted in advance
            # could redirect.
            pattern = posixpath.join(folder, f".{CONTROL_FILE}.XXXXXX")
            lines.append(f"tmp=$(mktemp -- {rquote(pattern)})")
            lines.append(
                f'printf \'%s\\n\' {shlex.quote(text)} > "$tmp" && mv -f -- "$tmp" {rquote(path)}'
            )
            paths.append(path)
        if not paths:
            raise RunError(f"pid {run.pid} names no dataset folder to write the plan to")
        await self._sh("\n".join(lines))
        return paths[0]

    # resume

    async def resume(
        self,
        run_or_dataset: RunProcess | str,
        new_max_tokens: int | None,
        *,
        max_samples: int | None = None,
        datasets: Sequence[str] | None = None,
        log_path: str | None = None,
    ) -> RunIdentity:
        """Start a stopped run's datasets again with a new budget; refuse a second writer.

        `run_or_dataset` is a :class:`RunProcess` from the list (its datasets, or `datasets`
        of them) or a dataset name (then the last run seen writing it, or the host's
        template).
        """
        if isinstance(run_or_dataset, RunProcess):
            run: RunProcess | None = run_or_dataset
            targets = tuple(datasets if datasets is not None else run_or_dataset.datasets)
        else:
            targets = (run_or_dataset,) if datasets is None else tuple(datasets)
            run = self._by_dataset.get(check_dataset_name(run_or_dataset))
        for name in targets:
            check_dataset_name(name)
        if not targets:
            raise RunError("nothing to resume: the run writes no known dataset")
        check_budget(new_max_tokens, "the token budget")
        check_budget(max_samples, "the sample budget")
        out_dir = self._abs_output_dir()
        if run is not None:
            if run.output_dir is None:
                raise RunError(unknown_folder(run, "nothing was started"))
            out_dir = run.output_dir
        try:
            report = await self._ps(self.pattern, out_dir)
        except SSHError as exc:
            raise RunError(
                f"{', '.join(targets)}: cannot check for a live writer ({describe(exc)}); "
                "nothing was started"
            ) from None
        out_dir = report.output_dir or out_dir
        locks = report.folder(out_dir)
        live = self._runs_from_report(report)
        refuse_live_writers(self.name, targets, locks, live, run, out_dir)
        if self.template is not None:
            argv = template_argv(self.template, targets, new_max_tokens, max_samples)
            cwd = None
        else:
            argv, cwd = edited_command(
                run, locks.get(targets[0]), targets, new_max_tokens, max_samples, report.uid
            )
        return await self.start(
            argv,
            log_path or resume_log_path(out_dir, targets[0]),
            cwd=cwd,
            output_dir=out_dir,
            expect=report.start_seq,
        )

    def resume_preview(self, dataset: str, max_samples: int | None = None) -> ResumePreview:
        """What :meth:`resume` of `dataset` would run, as far as this host knows without
        asking it: shown whole before Enter, so nobody starts a command they have not read.

        (command for a token budget, or None when it is the one the dataset's run.lock names,
        read and checked at the resume; the folder it runs in, None for the login folder.)
        """
        if self.template is not None:
            template = self.template
            return (lambda budget: template_argv(template, (dataset,), budget, max_samples)), None
        run = self._by_dataset.get(dataset)
        if run is None or not run.mine:
            return None, None
        found = run

        def command(budget: int | None) -> list[str]:
            argv, _ = edited_command(found, None, (dataset,), budget, max_samples, found.uid)
            return argv

        return command, run.cwd

    # watch

    def watch(
        self,
        output_dir: str,
        datasets: Sequence[str],
        resume: Mapping[str, str] | None = None,
        metrics_urls: Sequence[str] = (),
    ) -> Watch:
        """Live per-dataset totals of `datasets` under `output_dir` (names checked first),
        the load of the servers at `metrics_urls` and the GPUs, all read on the host.

        `resume` is an earlier Watch's `offsets()`, to carry on where it stopped.
        """
        return Watch(
            self._open_watcher, output_dir, datasets, resume=resume, metrics_urls=metrics_urls
        )
