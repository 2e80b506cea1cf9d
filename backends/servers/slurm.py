"""Slurm's command layer for servers (issue 32): the sbatch line, and what squeue, sacct and
scontrol say about a job.

A server on a cluster is one batch job: submitted from the login node with `sbatch
--parsable`, followed with `squeue`, its exit code and signal read once it ended from the
controller's record (`scontrol show job`) or, after the controller has forgotten it, from
the accounting (`sacct`), stopped with `scancel`. Every Slurm command goes through one
async callable `run(argv) -> (rc, stdout, stderr)`, so the same code runs here
(:func:`local_runner`) and on a login node over SSH (the hosts' command runner, which quotes
each word for the remote login shell).

Two rules hold throughout. What reaches a shell is quoted: the sbatch options are argv words
(no shell parses them here), and the job's own command line, which the node's `/bin/sh`
parses, is built with `shlex.quote` from the recipe's argv and environment, never by
pasting text. What Slurm prints is untrusted (a job name or a node list is someone's text):
it is read within bounds, a line that does not parse is named in one line, and an error is
one line naming the server, the partition and Slurm's own message, never a traceback.

Jobs carry the marker :data:`JOB_PREFIX` in their name: that is how the panel finds its
own servers again after it reopens (:meth:`SlurmJobs.ours`).
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from gen_tui.backends.aio import kill_child, within
from gen_tui.backends.config.slurm_names import JOB_PREFIX, job_name, recipe_of, slurm_time
from gen_tui.backends.untrusted import QUOTED_CHARS, one_line

__all__ = [
    "JOB_PREFIX",
    "BatchSpec",
    "JobStatus",
    "Listing",
    "OurJob",
    "Runner",
    "SlurmError",
    "SlurmJobs",
    "job_command",
    "job_name",
    "local_runner",
    "parse_listing",
    "parse_sacct",
    "parse_scontrol",
    "parse_squeue",
    "parse_submitted",
    "recipe_of",
    "sbatch_argv",
    "slurm_time",
]

Runner = Callable[[Sequence[str]], Awaitable[tuple[int, str, str]]]
"""Runs one command given as argv words: its exit status, stdout and stderr."""

MAX_LINES = 10_000
"""The most lines of one Slurm answer that are read (the rest is said to be left out)."""

MAX_OUTPUT_BYTES = 4 << 20
"""The most bytes of one command's stdout (or stderr) :func:`local_runner` takes."""

ENDED_STATES = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "REVOKED",
        "SPECIAL_EXIT",
        "TIMEOUT",
    }
)
"""Job states after which nothing of the job runs (Slurm's squeue/sacct spelling)."""

LIVE_STATES = frozenset(
    {
        "COMPLETING",
        "CONFIGURING",
        "PENDING",
        "REQUEUED",
        "REQUEUE_FED",
        "REQUEUE_HOLD",
        "RESIZING",
        "RESV_DEL_HOLD",
        "RUNNING",
        "SIGNALING",
        "STAGE_OUT",
        "STOPPED",
        "SUSPENDED",
    }
)
"""Job states of a job Slurm still holds (COMPLETING: its processes are being ended)."""

_JOB_ID = re.compile(r"\d{1,20}")
_SUBMITTED = re.compile(r"(\d{1,20})(?:;[\w.-]{1,100})?")
_STATE = re.compile(r"[A-Z_]{1,40}")
_NODES = re.compile(r"[\w.\-\[\],]{1,1000}")
_EXIT = re.compile(r"(\d{1,3}):(\d{1,3})")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_UNKNOWN_JOB = "Invalid job id specified"
"""What squeue and scontrol say of a job id the controller no longer holds."""
_NO_NODE = frozenset({"", "(null)", "None", "None assigned", "n/a"})


class SlurmError(Exception):
    """A Slurm command failed or said something unreadable: the message is one line that
    names the server (or job) and quotes Slurm's own words."""


@dataclass(frozen=True)
class BatchSpec:
    """One server as a batch job: what the launcher takes from a `[[servers]]` recipe."""

    name: str
    """The recipe's name: in the job name and in every error."""
    argv: Sequence[str]
    """The server's command, one word each (`python -m sglang.launch_server ...`)."""
    log: str
    """The job's stdout and stderr, an absolute path on the cluster's shared disk."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Set for the server alone (`CUDA_VISIBLE_DEVICES`), on top of sbatch's exported one."""
    partition: str | None = None
    """None: the cluster's default partition."""
    gpus: int = 0
    """GPUs on the job's one node (`--gres=gpu:N`); 0 asks for none."""
    time: str | None = None
    """Slurm's time limit spelling (`90`, `4:00:00`, `2-00:00:00`); None: the partition's."""
    workdir: str | None = None
    """The job's working folder (`--chdir`); None: where sbatch runs."""


@dataclass(frozen=True)
class JobStatus:
    """What Slurm says of one job now."""

    job_id: str
    state: str
    """Slurm's word: RUNNING, PENDING, CANCELLED, FAILED..."""
    node: str | None = None
    """Where it runs or ran (a Slurm node list, one node for a server); None before that."""
    exit_code: int | None = None
    """The batch script's exit status, once ended and when Slurm kept it."""
    signal: int | None = None
    """The signal that ended it (15 for a plain scancel), 0 or None when none did."""
    source: str = "squeue"
    """Which command said it (squeue, sacct or scontrol)."""

    @property
    def ended(self) -> bool:
        """Nothing of the job runs any more."""
        return self.state in ENDED_STATES

    @property
    def running(self) -> bool:
        """The job's command has started on its node."""
        return self.state == "RUNNING" and self.node is not None


@dataclass(frozen=True)
class OurJob:
    """A job of ours in the queue, as :meth:`SlurmJobs.ours` lists it."""

    job_id: str
    recipe: str
    """The recipe name from the job name (as :func:`job_name` wrote it)."""
    state: str
    node: str | None


@dataclass(frozen=True)
class Listing:
    """Our jobs, and one line about any line of squeue's answer that was not read."""

    jobs: list[OurJob]
    odd: str | None = None


def _named(spec: BatchSpec) -> str:
    """The recipe's name as an error line quotes it (a name is text from a config file)."""
    return one_line(spec.name, 200)


def _word(value: str, what: str, spec: BatchSpec) -> str:
    """`value`, if it can be one word of a command line sent anywhere; else SlurmError.

    A line break cannot be quoted for a csh/tcsh login shell, which may parse the sbatch
    line on the login node, and a NUL cannot pass at all: refused, naming it.
    """
    if any(char in value for char in "\n\r\0"):
        raise SlurmError(
            f"server {_named(spec)}: {what} {one_line(repr(value), 200)} holds a line break or "
            "NUL: refused, it cannot go on a command line"
        )
    return value


def job_command(spec: BatchSpec) -> str:
    """The line the job's `/bin/sh` runs: the environment, then the server's argv, each
    word quoted, and `exec` so that the server is the job's process and scancel's signal
    reaches it."""
    if not spec.argv:
        raise SlurmError(f"server {_named(spec)}: the command is empty")
    words = ["exec", "env"]
    for key, value in spec.env.items():
        if not _ENV_NAME.fullmatch(key):
            raise SlurmError(
                f"server {_named(spec)}: environment name {one_line(repr(key), 200)} is not a "
                "variable name (letters, digits and _, not starting with a digit)"
            )
        words.append(f"{key}={_word(value, f'environment {key}', spec)}")
    # env takes each leading word with `=` for a variable: a command whose first word has
    # one would be read as another variable, and the next word run. Refused instead.
    if "=" in spec.argv[0]:
        raise SlurmError(
            f"server {_named(spec)}: the command's first word {one_line(repr(spec.argv[0]), 200)} "
            "holds `=`, which env would read as a variable"
        )
    words += [_word(arg, "argument", spec) for arg in spec.argv]
    return shlex.join(words)


def sbatch_argv(spec: BatchSpec) -> list[str]:
    """The sbatch command for `spec`'s server, as argv words.

    The script travels as `--wrap` (sbatch writes it as `#!/bin/sh` and the line): the
    runner takes argv only, so there is no script file to copy to the login node first.
    """
    log = _word(spec.log, "log file", spec)
    if not log.startswith("/"):
        raise SlurmError(f"server {_named(spec)}: log file {one_line(log, 200)} is not absolute")
    if "%" in log or "\\" in log:
        # sbatch replaces %j, %N... in --output, and a backslash turns that off: the log
        # would not be where gen-tui reads it.
        raise SlurmError(
            f"server {_named(spec)}: log file {one_line(log, 200)} holds % or \\, which sbatch "
            "rewrites (%j, %N...)"
        )
    argv = [
        "sbatch",
        "--parsable",
        f"--job-name={job_name(spec.name)}",
        f"--output={log}",
        "--nodes=1",
        "--ntasks=1",
    ]
    if spec.partition is not None:
        partition = _word(spec.partition, "partition", spec)
        if not partition:
            raise SlurmError(f"server {_named(spec)}: the partition is empty")
        argv.append(f"--partition={partition}")
    if spec.gpus < 0:
        raise SlurmError(f"server {_named(spec)}: gpus must not be negative, got {spec.gpus}")
    if spec.gpus:
        argv.append(f"--gres=gpu:{spec.gpus}")
    if spec.time is not None:
        if not slurm_time(spec.time):
            raise SlurmError(
                f"server {_named(spec)}: time {one_line(repr(spec.time), 200)} is not a Slurm "
                "time limit (minutes, H:MM:SS, D-HH:MM:SS or UNLIMITED)"
            )
        argv.append(f"--time={spec.time}")
    if spec.workdir is not None:
        argv.append(f"--chdir={_word(spec.workdir, 'working folder', spec)}")
    argv.append(f"--wrap={job_command(spec)}")
    return argv


def _lines(text: str) -> tuple[list[str], int]:
    """The non-empty lines of `text`, at most :data:`MAX_LINES`, and how many were left out."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[:MAX_LINES], max(0, len(lines) - MAX_LINES)


def _odd(command: str, job_id: str, text: str) -> SlurmError:
    return SlurmError(
        f"job {job_id}: {command} said something unreadable: {one_line(repr(text), 200)}"
    )


def _node(text: str) -> str | None:
    return None if text in _NO_NODE else text


def _readable_node(text: str) -> bool:
    """A node list as Slurm writes one, or its word for none."""
    return text in _NO_NODE or _NODES.fullmatch(text) is not None


def parse_submitted(stdout: str) -> str:
    """The job id from `sbatch --parsable`'s output (`123` or `123;cluster`)."""
    lines, _ = _lines(stdout)
    if len(lines) == 1 and (match := _SUBMITTED.fullmatch(lines[0])):
        return match.group(1)
    raise SlurmError(
        f"sbatch --parsable printed no job id: {one_line(repr(stdout[:QUOTED_CHARS]), 200)}"
    )


def parse_squeue(job_id: str, stdout: str) -> JobStatus | None:
    """`squeue -h -j ID -t all -o '%T %N'`'s answer (None: squeue no longer holds the job)."""
    lines, _ = _lines(stdout)
    if not lines:
        return None
    state, _, node = lines[0].partition(" ")
    node = node.strip()
    if len(lines) > 1 or not _STATE.fullmatch(state) or not _readable_node(node):
        raise _odd("squeue", job_id, stdout[:QUOTED_CHARS])
    return JobStatus(job_id, state, _node(node), source="squeue")


def parse_sacct(job_id: str, stdout: str) -> JobStatus | None:
    """`sacct -n -P -j ID -o JobID,State,ExitCode,NodeList`'s answer (None: no record).

    The job's own line (`ID|...`) has its state (a cancelled job's reads `CANCELLED by
    1000`: the first word is the state) and node; the batch step's (`ID.batch|...`) has the
    exit code of the job's command, the server (the job's line has 0:0 for a cancelled one).
    Other steps' lines (`ID.extern`, `ID.0`) are not the server's and are passed over.
    """
    lines, _ = _lines(stdout)
    job: list[str] | None = None
    batch: list[str] | None = None
    for line in lines:
        fields = line.split("|")
        if len(fields) != 4:
            raise _odd("sacct", job_id, line[:QUOTED_CHARS])
        if fields[0] == job_id:
            job = fields  # a requeued job's latest run comes last
        elif fields[0] == f"{job_id}.batch":
            batch = fields
        elif not fields[0].startswith(f"{job_id}."):
            raise _odd("sacct", job_id, line[:QUOTED_CHARS])
    if job is None:
        return None
    state = job[1].split(" ", 1)[0]
    exit_match = _EXIT.fullmatch((batch or job)[2])
    node = job[3].strip()
    if not _STATE.fullmatch(state) or not exit_match or not _readable_node(node):
        raise _odd("sacct", job_id, "|".join(job)[:QUOTED_CHARS])
    ended = state in ENDED_STATES
    return JobStatus(
        job_id,
        state,
        _node(node),
        exit_code=int(exit_match.group(1)) if ended else None,
        signal=int(exit_match.group(2)) if ended else None,
        source="sacct",
    )


def parse_scontrol(job_id: str, stdout: str) -> JobStatus | None:
    """`scontrol show job -o ID`'s answer: one line of key=value words (None: empty).

    The first JobState, ExitCode and NodeList words count: gen-tui's job names hold none of
    `=` or spaces (:func:`job_name`), and the keys come before the free text (Command=,
    WorkDir=, Comment=) that could imitate one.
    """
    lines, _ = _lines(stdout)
    if not lines:
        return None
    found: dict[str, str] = {}
    for word in lines[0].split(" "):
        key, sep, value = word.partition("=")
        if sep and key in ("JobState", "ExitCode", "NodeList") and key not in found:
            found[key] = value
    state = found.get("JobState", "")
    exit_match = _EXIT.fullmatch(found.get("ExitCode", ""))
    node = found.get("NodeList", "")
    if not _STATE.fullmatch(state) or not _readable_node(node):
        raise _odd("scontrol show job", job_id, lines[0][:QUOTED_CHARS])
    ended = state in ENDED_STATES
    return JobStatus(
        job_id,
        state,
        _node(node),
        exit_code=int(exit_match.group(1)) if ended and exit_match else None,
        signal=int(exit_match.group(2)) if ended and exit_match else None,
        source="scontrol",
    )


def parse_listing(stdout: str) -> Listing:
    """`squeue -h --me -o '%i|%T|%N|%j'`: the jobs named with our marker. Another job is
    not ours and is skipped; a line that does not parse is named (the first, and a count)."""
    lines, left_out = _lines(stdout)
    jobs: list[OurJob] = []
    odd: list[str] = []
    for line in lines:
        fields = line.split("|", 3)
        if len(fields) != 4:
            odd.append(line)
            continue
        job_id, state, node, name = (part.strip() for part in fields)
        if not name.startswith(JOB_PREFIX):
            continue
        recipe = recipe_of(name)
        if (
            recipe is None
            or not _JOB_ID.fullmatch(job_id)
            or not _STATE.fullmatch(state)
            or not _readable_node(node)
        ):
            odd.append(line)
            continue
        jobs.append(OurJob(job_id, recipe, state, _node(node)))
    said = []
    if odd:
        said.append(
            f"{len(odd)} unreadable line{'s' * (len(odd) > 1)} skipped, the first: "
            f"{one_line(repr(odd[0][:QUOTED_CHARS]), 200)}"
        )
    if left_out:
        said.append(f"{left_out:,} more lines not read")
    return Listing(jobs, f"squeue: {'; '.join(said)}" if said else None)


def _slurm_says(stdout: str, stderr: str) -> str:
    """Slurm's own message from a failed command, as one bounded line."""
    lines = _lines(stderr)[0] or _lines(stdout)[0]
    return one_line("; ".join(lines) or "no message", QUOTED_CHARS)


def _check_id(job_id: str) -> str:
    if not _JOB_ID.fullmatch(job_id):
        raise SlurmError(f"not a Slurm job id: {one_line(repr(job_id), 200)}")
    return job_id


class SlurmJobs:
    """Submit, follow, list and cancel gen-tui's jobs through `run` (here or over SSH)."""

    def __init__(self, run: Runner) -> None:
        self._run = run

    async def submit(self, spec: BatchSpec) -> str:
        """Submit `spec`'s server; its job id. SlurmError: one line naming the server, the
        partition and Slurm's message (a partition that does not exist, no sbatch)."""
        argv = sbatch_argv(spec)
        rc, out, err = await self._run(argv)
        where = f"partition {spec.partition}" if spec.partition else "the default partition"
        # sh and bash say so with status 127, csh and tcsh with 1 and "Command not found."
        if rc == 127 or (rc != 0 and "command not found" in err.lower()):
            raise SlurmError(
                f"server {_named(spec)}: sbatch is not installed (or not on PATH) where it was "
                f"run: {_slurm_says(out, err)}"
            )
        if rc != 0:
            raise SlurmError(
                f"server {_named(spec)}: sbatch refused the job on {where}: {_slurm_says(out, err)}"
            )
        try:
            return parse_submitted(out)
        except SlurmError as exc:
            raise SlurmError(f"server {_named(spec)}: {exc}") from None

    async def status(self, job_id: str) -> JobStatus | None:
        """What Slurm says of the job now; None when no command knows it any more.

        squeue while the controller holds the job, which it does for a few minutes
        (MinJobAge) after the end too, but without the exit code: for an ended job the
        controller's own record (scontrol) has it at once, where the accounting database
        may lag a moment. Once the controller has forgotten the job, sacct (where the
        cluster keeps accounting) still knows how it ended.
        """
        _check_id(job_id)
        rc, out, err = await self._run(["squeue", "-h", "-j", job_id, "-t", "all", "-o", "%T %N"])
        if rc == 0:
            queued = parse_squeue(job_id, out)
        elif _UNKNOWN_JOB in err:
            queued = None
        else:  # the controller down is not the job gone: nothing may be restarted on it
            raise SlurmError(f"job {job_id}: squeue failed: {_slurm_says(out, err)}")
        if queued is not None and not queued.ended:
            return queued
        order = (self.shown, self.accounted) if queued is not None else (self.accounted, self.shown)
        for read in order:
            found = await read(job_id)
            # An ended job the accounting has not caught up with yet reads as running there.
            if found is not None and (found.ended or queued is None):
                return found
        return queued

    async def accounted(self, job_id: str) -> JobStatus | None:
        """What the accounting database says of the job (sacct); None when it has no
        record or the cluster keeps no accounting (sacct then fails, saying so)."""
        rc, out, _ = await self._run(
            ["sacct", "-n", "-P", "-j", _check_id(job_id), "-o", "JobID,State,ExitCode,NodeList"]
        )
        return parse_sacct(job_id, out) if rc == 0 else None

    async def shown(self, job_id: str) -> JobStatus | None:
        """What the controller's record says of the job (scontrol show job); None when the
        controller does not hold it."""
        rc, out, _ = await self._run(["scontrol", "show", "job", "-o", _check_id(job_id)])
        return parse_scontrol(job_id, out) if rc == 0 else None

    async def cancel(self, job_id: str, signal: str | None = None) -> None:
        """scancel the job; with `signal` (TERM), send it to every process of the job (the
        server included) without ending the job (Slurm's KillWait then still applies)."""
        argv = ["scancel"]
        if signal is not None:
            if not re.fullmatch(r"[A-Z0-9]{1,10}", signal):
                raise SlurmError(f"job {job_id}: not a signal name: {one_line(repr(signal))}")
            argv += ["--full", f"--signal={signal}"]
        rc, out, err = await self._run([*argv, _check_id(job_id)])
        if rc != 0:
            raise SlurmError(f"job {job_id}: scancel failed: {_slurm_says(out, err)}")

    async def ours(self) -> Listing:
        """The jobs of this user that carry gen-tui's marker, in any state squeue shows."""
        rc, out, err = await self._run(["squeue", "-h", "--me", "-o", "%i|%T|%N|%j"])
        if rc != 0:
            raise SlurmError(f"squeue failed: {_slurm_says(out, err)}")
        return parse_listing(out)


async def _bounded(stream: asyncio.StreamReader) -> tuple[bytes, bool]:
    """What `stream` holds up to :data:`MAX_OUTPUT_BYTES`, and whether it held more."""
    data = bytearray()
    while chunk := await stream.read(65536):
        data += chunk
        if len(data) > MAX_OUTPUT_BYTES:
            return bytes(data[:MAX_OUTPUT_BYTES]), True
    return bytes(data), False


async def _outputs(streams: Sequence[asyncio.StreamReader]) -> tuple[list[bytes], bool]:
    """Each of `streams` whole (bounded), or as soon as one passes the limit ([], True):
    the others are not waited for (their writer may go on, or a child of it hold them)."""
    readers = [asyncio.ensure_future(_bounded(stream)) for stream in streams]
    try:
        for finished in asyncio.as_completed(readers):
            if (await finished)[1]:
                return [], True
        return [reader.result()[0] for reader in readers], False
    finally:
        for reader in readers:
            reader.cancel()


async def _pipe_reader(fd: int) -> tuple[asyncio.StreamReader, asyncio.BaseTransport]:
    """The read end `fd` of a pipe as a stream, and the transport whose close closes it."""
    reader = asyncio.StreamReader()
    transport, _protocol = await asyncio.get_running_loop().connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0)
    )
    return reader, transport


def local_runner(timeout: float = 60.0, env: Mapping[str, str] | None = None) -> Runner:
    """A :data:`Runner` on this machine (no shell): a command that is not here ends as a
    shell's would, with status 127 and a line saying so; one that prints more than
    :data:`MAX_OUTPUT_BYTES` on either stream is killed at once, said in one line.

    Its stdout and stderr are pipes of our own, not asyncio's: asyncio's `wait()` returns
    only once its pipes are closed, and a pipe no longer read (past the limit) or held by a
    child of the command never closed, so a command cut at the limit was waited on until
    the timeout (and past it)."""

    async def run(argv: Sequence[str]) -> tuple[int, str, str]:
        (out_r, out_w), (err_r, err_w) = os.pipe(), os.pipe()
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out_w,
                stderr=err_w,
                env=None if env is None else dict(env),
            )
        except OSError as exc:
            os.close(out_r)
            os.close(err_r)
            if isinstance(exc, FileNotFoundError):
                return 127, "", f"{argv[0]}: command not found"
            return 126, "", f"{argv[0]}: {exc.strerror or exc}"
        finally:
            os.close(out_w)  # the child's now: our copies would keep the pipes open
            os.close(err_w)
        transports: list[asyncio.BaseTransport] = []
        try:
            streams = []
            for fd in (out_r, err_r):
                stream, transport = await _pipe_reader(fd)
                streams.append(stream)
                transports.append(transport)
            outputs, cut = await within(_outputs(streams), timeout)
        except TimeoutError:
            kill_child(process)
            await process.wait()
            return 124, "", f"{argv[0]}: no answer within {timeout:g} s"
        finally:
            for transport in transports:
                transport.close()
        if cut:
            kill_child(process)
        rc = await process.wait()
        if cut:
            return 1, "", f"{argv[0]}: printed more than {MAX_OUTPUT_BYTES:,} bytes: stopped"
        out, err = outputs
        return rc, out.decode(errors="replace"), err.decode(errors="replace")

    return run
