"""The watcher's `ps` report, parsed once into typed records, and the runs read off it.

Both hosts list processes with the same code (`watcher.ps`, run in-process here or over
SSH there); this module turns its JSON into :class:`PsReport` so nothing downstream passes a
`dict[str, Any]` around.

Owner, not pattern: a shared GPU box lists every user's runs, and each process, lock file
and the watcher itself (the login user) carry their uid, so that gen-tui can refuse to
stop another user's run or to run a command line someone else wrote (:func:`owner_text`).

Identity, not pid: a run is remembered as host, pid, start time (`/proc/PID/stat` field 22),
boot id and command line, and all of them are checked right before every signal, so a
reused pid is never signalled.
"""

from __future__ import annotations

import posixpath
import shlex
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gen_tui.backends.hosts.argv import is_gen_tui
from gen_tui.backends.hosts.errors import RunError
from gen_tui.backends.untrusted import one_line
from gen_tui.backends.watcher import RAW_FILE

UNKNOWN_CHARS = 400
"""The most of the watcher's line on why a run's folder is unknown kept (it quotes a path
from anyone's command line)."""


@dataclass(frozen=True)
class RunIdentity:
    """Who a run is, beyond its pid: pids are reused, start time + boot + command line are not."""

    host: str
    pid: int
    start_time: float
    boot_id: str
    cmdline: tuple[str, ...]
    start_ticks: int | None = None
    cmdline_sha256: str | None = None
    """Of another user's command line over the watcher's bound (`cmdline` is then its
    first `watcher.CMDLINE_SHOWN` bytes): the SHA-256 of the whole, so two long ones that
    share their start still differ."""
    cmdline_bytes: int | None = None
    """The whole command line's size, when `cmdline` is cut."""

    def same_process(self, other: RunIdentity) -> bool:
        if self.pid != other.pid or self.cmdline != other.cmdline:
            return False
        if self.cmdline_sha256 != other.cmdline_sha256:
            return False
        if self.boot_id and other.boot_id and self.boot_id != other.boot_id:
            return False
        if self.start_ticks is not None and other.start_ticks is not None:
            return self.start_ticks == other.start_ticks
        return abs(self.start_time - other.start_time) < 0.05

    def cmdline_hex(self) -> str:
        """`/proc/PID/cmdline` as the signal script compares it (hex, no trailing NUL)."""
        raw = b"\0".join(arg.encode("utf-8", "surrogateescape") for arg in self.cmdline)
        return raw.hex()

    @property
    def command(self) -> str:
        """The command line as a shell would take it; a cut one says so at its end."""
        if self.cmdline_bytes is None:
            return shlex.join(self.cmdline)
        return f"{shlex.join(self.cmdline)} ... (cut: {self.cmdline_bytes:,} bytes in all)"


@dataclass(frozen=True)
class ProcRecord:
    """One process as the watcher saw it in /proc."""

    pid: int
    ppid: int | None
    pgid: int | None
    state: str
    """The /proc state letter: "R", "S", "T" (stopped), "Z" (zombie)..."""
    start_ticks: int | None
    start_time: float
    cmdline: tuple[str, ...]
    cwd: str | None
    uid: int | None
    """The owner's real uid: a run of another user is not ours to stop or resume."""
    user: str | None
    """The owner's login name, where the host has one."""
    datasets: tuple[str, ...] | None
    """The command line's `--datasets`, when it has one."""
    prompt_names: tuple[str, ...]
    output_dir_abs: str | None
    output_dir_unknown: str | None = None
    """Why its output folder cannot be told (a `--config` that cannot be read): then it is
    counted in no folder, the watched one included, until it writes somewhere."""
    cmdline_sha256: str | None = None
    cmdline_bytes: int | None = None
    """Set when the watcher cut the command line (another user's, over its bound)."""
    writes: tuple[tuple[str, str], ...] = ()
    """(output folder, dataset) whose record file it has open for writing, as ours or the
    dataset folder's owner's process (`watcher.processes._record_writers`)."""

    @property
    def gone(self) -> bool:
        return self.state in ("Z", "X")

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> ProcRecord:
        args = raw.get("args") or {}
        datasets = args.get("datasets")
        return cls(
            pid=int(raw["pid"]),
            ppid=_int(raw.get("ppid")),
            pgid=_int(raw.get("pgid")),
            state=str(raw.get("state", "")),
            start_ticks=_int(raw.get("start_ticks")),
            start_time=float(raw["start_time"]),
            cmdline=tuple(str(word) for word in raw["cmdline"]),
            cwd=raw.get("cwd") if isinstance(raw.get("cwd"), str) else None,
            uid=_int(raw.get("uid")),
            user=_str(raw.get("user")),
            datasets=tuple(datasets) if isinstance(datasets, list) else None,
            prompt_names=tuple(raw.get("prompt_names") or ()),
            output_dir_abs=raw.get("output_dir_abs") or None,
            output_dir_unknown=one_line(raw["output_dir_unknown"], UNKNOWN_CHARS)
            if isinstance(raw.get("output_dir_unknown"), str)
            else None,
            cmdline_sha256=_str(raw.get("cmdline_sha256")),
            cmdline_bytes=_int(raw.get("cmdline_bytes")),
            writes=tuple(
                (str(pair[0]), str(pair[1]))
                for pair in raw.get("writes_datasets") or ()
                if isinstance(pair, list) and len(pair) == 2
            ),
        )

    def identity(self, host: str, boot_id: str) -> RunIdentity:
        return RunIdentity(
            host=host,
            pid=self.pid,
            start_time=self.start_time,
            boot_id=boot_id,
            cmdline=self.cmdline,
            start_ticks=self.start_ticks,
            cmdline_sha256=self.cmdline_sha256,
            cmdline_bytes=self.cmdline_bytes,
        )


def owner_text(uid: int | None, user: str | None) -> str:
    """ "alice (uid 1001)", as a refusal names the owner of a run or a file."""
    if uid is None:
        return "an unknown user"
    return f"{one_line(user, 64)} (uid {uid})" if user else f"uid {uid}"


@dataclass(frozen=True)
class LockRecord:
    """A dataset folder's `run.lock`: held by a live writer or not, and what it last said."""

    locked: bool
    pid: int | None
    holder: Mapping[str, Any]
    file: Mapping[str, Any] = field(default_factory=dict)
    """Who owns the lock file and its folder, and their modes (`watcher.file_owner`)."""

    @classmethod
    def parse(cls, raw: Any) -> LockRecord:
        raw = raw if isinstance(raw, Mapping) else {}
        holder = raw.get("holder")
        holder = holder if isinstance(holder, Mapping) else {}
        owner = raw.get("file")
        owner = owner if isinstance(owner, Mapping) else {}
        return cls(bool(raw.get("locked")), _int(raw.get("pid")), holder, owner)

    def distrust(self, uid: int | None) -> str | None:
        """Why the lock file's words cannot be run as user `uid` (None: they can).

        Only a regular file that `uid` owns, in a folder that `uid` owns, neither writable
        by group or others, can only have been written by `uid` (or root): anything else
        may hold a command line someone else planted.
        """
        file_uid, mode = _int(self.file.get("uid")), _int(self.file.get("mode"))
        dir_uid, dir_mode = _int(self.file.get("dir_uid")), _int(self.file.get("dir_mode"))
        if uid is None or None in (file_uid, mode, dir_uid, dir_mode):
            return "its owner cannot be told"
        assert mode is not None and dir_mode is not None
        if not stat.S_ISREG(mode):
            return "it is not a regular file (a link?)"
        if file_uid != uid:
            return f"it belongs to {owner_text(file_uid, _str(self.file.get('user')))}"
        if mode & 0o022:
            return f"group or others may write it (mode {stat.S_IMODE(mode):04o})"
        if dir_uid != uid:
            return f"its folder belongs to {owner_text(dir_uid, _str(self.file.get('dir_user')))}"
        if dir_mode & 0o022 and not dir_mode & stat.S_ISVTX:
            return f"group or others may write its folder (mode {stat.S_IMODE(dir_mode):04o})"
        return None


@dataclass(frozen=True)
class PsReport:
    """One `watcher --ps`: the matching processes and the dataset folders' locks."""

    boot_id: str
    time: float | None
    uid: int | None
    """The watcher's own uid: the login user's, whom gen-tui acts as on the host."""
    user: str | None
    output_dir: str | None
    """The output directory asked about, as the host resolved it (absolute, `~` expanded)."""
    start_seq: int | None
    """The folder's start count, read before the processes (see `watcher.guarded_start`)."""
    procs: tuple[ProcRecord, ...]
    locks: Mapping[str, Mapping[str, LockRecord]]
    """{output folder: {dataset: lock}} for the asked folder and each run's."""
    output_dir_problem: str | None = None
    """Why the asked output folder holds no datasets ("does not exist"), or None."""

    @classmethod
    def parse(cls, raw: Mapping[str, Any], host: str) -> PsReport:
        try:
            seq = raw.get("start_seq")
            return cls(
                boot_id=str(raw.get("boot_id") or ""),
                time=float(raw["time"]) if raw.get("time") else None,
                uid=_int(raw.get("uid")),
                user=_str(raw.get("user")),
                output_dir=str(raw["output_dir"]) if raw.get("output_dir") else None,
                start_seq=seq if isinstance(seq, int) and not isinstance(seq, bool) else None,
                procs=tuple(ProcRecord.parse(proc) for proc in raw.get("procs", [])),
                locks={
                    str(folder): {
                        str(name): LockRecord.parse(info) for name, info in entries.items()
                    }
                    for folder, entries in (raw.get("locks") or {}).items()
                },
                output_dir_problem=_str(raw.get("output_dir_problem")),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise RunError(f"{host}: the process listing is malformed ({exc!r})") from None

    def folder(self, output_dir: str) -> Mapping[str, LockRecord]:
        """The dataset folders of `output_dir` and their locks."""
        return self.locks.get(output_dir, {})


@dataclass(frozen=True)
class RunProcess:
    """One generation process on a host, as the run list shows it."""

    identity: RunIdentity
    datasets: tuple[str, ...]
    state: str  # "writing" (holds a dataset lock), "running", "paused" (SIGSTOP)
    elapsed_s: float
    output_dir: str | None
    """None: unknown (`folder_unknown` says why), a folder no panel watches."""
    cwd: str | None
    writing: tuple[str, ...] = ()
    """The datasets it writes: their lock, or (a lock-less script of ours or of the folder's
    owner) their record file open for writing. Never what its command line only names."""
    gen_tui: bool = False
    uid: int | None = None
    user: str | None = None
    mine: bool = False
    """Owned by the user gen-tui acts as on the host (the login user over SSH)."""
    folder_unknown: str | None = None
    """Why its output folder is unknown (`output_dir` None), said where the folder is."""

    @property
    def pid(self) -> int:
        return self.identity.pid

    @property
    def owner(self) -> str:
        """ "alice (uid 1001)"."""
        return owner_text(self.uid, self.user)

    def refuse_unless_mine(self, what: str) -> None:
        """Raise :class:`RunError` naming the owner when the run is another user's.

        `what` ends the line: "runs another user's command line", "stops another user's run".
        """
        if not self.mine:
            raise RunError(f"pid {self.pid} belongs to {self.owner}: gen-tui never {what}")

    @property
    def written_folder(self) -> str:
        """The folder it writes, or "unknown (why)" when that cannot be told (a `gen-tui run
        --config` whose config the watcher cannot read: counted in no watched folder)."""
        if self.output_dir is not None:
            return self.output_dir
        return f"unknown ({self.folder_unknown})" if self.folder_unknown else "unknown"

    def record_files(self) -> list[str]:
        if self.output_dir is None:
            return []
        return [posixpath.join(self.output_dir, name, RAW_FILE) for name in self.datasets]


def unknown_folder(run: RunProcess, outcome: str) -> str:
    """The line refusing to act on `run`'s dataset folders when its output folder is unknown:
    "pid 3951 writes a folder that cannot be told (config x cannot be read); OUTCOME"."""
    why = f" ({run.folder_unknown})" if run.folder_unknown else ""
    return f"pid {run.pid} writes a folder that cannot be told{why}; {outcome}"


@dataclass(frozen=True)
class Survey:
    """One look at a host: its runs, and the dataset folders under its output directory."""

    runs: tuple[RunProcess, ...]
    output_dir: str
    """The output directory as the host resolved it (absolute, `~` expanded)."""
    folders: tuple[str, ...]
    problem: str | None = None
    """Why the output directory holds no datasets ("/x does not exist"), or None."""


def runs_in(report: PsReport, host: str, default_out: str, now: float) -> list[RunProcess]:
    """The runs of a report: each process with its datasets, folder and what it writes.

    A run writes a dataset when it holds the dataset's lock, or (a lock-less script) has
    its record file open for writing as ours or the folder owner's process: a command
    line that only names a dataset never makes a writer. A run writes where its
    `--output-dir` says; one that says nothing but writes elsewhere writes there.
    """
    runs = []
    for proc in report.procs:
        identity = proc.identity(host, report.boot_id)
        names = list(proc.datasets or proc.prompt_names)
        out_dir = proc.output_dir_abs or (None if proc.output_dir_unknown else default_out)
        writing = []
        held = [
            (folder, dataset)
            for folder, entries in report.locks.items()
            for dataset, lock in entries.items()
            if lock.locked and lock.pid == proc.pid
        ]
        for folder, dataset in [*held, *proc.writes]:
            if dataset not in writing:
                writing.append(dataset)
            if folder != out_dir and not names:
                out_dir = folder
        for dataset in writing:
            if dataset not in names:
                names.append(dataset)
        state = "paused" if proc.state in ("T", "t") else ("writing" if held else "running")
        runs.append(
            RunProcess(
                identity=identity,
                datasets=tuple(names),
                state=state,
                elapsed_s=max(0.0, now - identity.start_time),
                output_dir=out_dir,
                cwd=proc.cwd,
                writing=tuple(writing),
                gen_tui=is_gen_tui(identity.cmdline),
                uid=proc.uid,
                user=proc.user,
                mine=proc.uid is not None and proc.uid == report.uid,
                folder_unknown=proc.output_dir_unknown if out_dir is None else None,
            )
        )
    return runs


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
