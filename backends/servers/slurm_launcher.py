"""The Slurm launcher: a server as a batch job, submitted, followed, cancelled and found
again through the command layer of `slurm.py` (issue 32).

Why a launcher of its own: a batch job waits in a queue before it runs (the startup
deadline counts from when it runs), runs on a node known only then (its URL is that
node's), ends with a state and an exit code but no signal of the server's own, and
outlives gen-tui in the queue, where its job name's marker finds it again. The commands
run here (`recipe.host = "local"`: this machine is the login node) or on a `[[hosts]]`
login node over SSH (:func:`ssh_runner`, each word quoted for the login shell).

What is an exit here: a job Slurm says ended, or one that neither squeue, scontrol nor
sacct knows any more (how it ended is then unknown). A Slurm command that fails (the
controller down, a dropped SSH link) is not an exit: the job is asked about again at the
next check, and nothing is resubmitted on it. A job that reached its time limit (TIMEOUT)
ended as its recipe asked: it is said as such and not restarted; one that ended before it
is restarted like a crashed process.
"""

from __future__ import annotations

import asyncio
import contextlib
import posixpath
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import ClassVar

from gen_tui.backends.config.server_recipe import ServerRecipe
from gen_tui.backends.drain_notice import NOTICE_FOLDER, notice_name, notice_node, notice_text
from gen_tui.backends.hosts import Host, LocalHost
from gen_tui.backends.hosts.connection import SSHConnection, describe
from gen_tui.backends.hosts.errors import RunError
from gen_tui.backends.hosts.scripts import remote_quote
from gen_tui.backends.hosts.ssh import SSHHost
from gen_tui.backends.hosts.ssh_target import SSHError
from gen_tui.backends.servers.launcher import Exit, Launched, Launcher, LaunchError
from gen_tui.backends.servers.process import MARKER, REMOTE_FOLDER, last_of
from gen_tui.backends.servers.slurm import (
    ENDED_STATES,
    BatchSpec,
    JobStatus,
    Runner,
    SlurmError,
    SlurmJobs,
    local_runner,
)
from gen_tui.backends.servers.state import StateFile
from gen_tui.backends.untrusted import one_line

KIND = "slurm"
POLL_S = 1.0
"""How often a submitted job's state is asked while it waits to run or to end."""
END_WAIT_S = 60.0
"""How long a cancelled job may take to end (Slurm's KillWait, then SIGKILL) before the
stop says it is still ending."""
COMMAND_TIMEOUT_S = 60.0


def ssh_runner(connection: SSHConnection, host: str, timeout: float = COMMAND_TIMEOUT_S) -> Runner:
    """A Slurm :data:`Runner` on a login node over SSH: each argv word quoted for any
    login shell (sh, bash, csh, tcsh: `remote_quote`). A link that drops, or a command with
    no exit status, is a :class:`SlurmError` (asked again later), never an answer."""

    async def run(argv: Sequence[str]) -> tuple[int, str, str]:
        try:
            line = " ".join(remote_quote(word, "a word") for word in argv)
        except RunError as exc:
            raise SlurmError(f"{host}: {one_line(str(exc), 300)}") from None
        try:
            result = await connection.run(line, timeout=timeout)
        except SSHError as exc:
            raise SlurmError(
                f"{host}: the link failed while asking Slurm ({describe(exc)})"
            ) from None
        if result.exit_status is None:
            raise SlurmError(f"{host}: {argv[0]} ended without an exit status (a lost link?)")
        return int(result.exit_status), str(result.stdout or ""), str(result.stderr or "")

    return run


def ended_words(status: JobStatus) -> tuple[str, bool]:
    """How a job ended, in a few words, and whether it ended as asked (its time limit)."""
    if status.state == "TIMEOUT":
        return "reached its time limit (TIMEOUT): not restarted", True
    words = f"ended {status.state}"
    if status.signal:
        words += f", signal {status.signal}"
    if status.exit_code is not None:
        words += f", exit code {status.exit_code}"
    return words + f" on {status.node or 'no node'}", False


class SlurmLauncher(Launcher):
    """Servers as batch jobs, submitted from the login node each recipe's `host` names.

    `hosts` are "local" and the `[[hosts]]` entries; `recipes` are the config's, so a job
    of ours found in the queue is matched to its recipe; `runners` (tests) replace the
    Slurm command runner of a host.
    """

    queues: ClassVar[bool] = True
    ref_word: ClassVar[str] = "job"

    def __init__(
        self,
        hosts: Mapping[str, Host],
        folder: str,
        state: StateFile,
        recipes: Sequence[ServerRecipe],
        *,
        poll_s: float = POLL_S,
        remote_folder: str = REMOTE_FOLDER,
        runners: Mapping[str, Runner] | None = None,
    ) -> None:
        self.hosts = hosts
        self.local_folder = folder.rstrip("/")
        self.remote_folder = remote_folder.rstrip("/")
        self.state = state
        self.recipes = [recipe for recipe in recipes if recipe.launcher == KIND]
        self.poll_s = poll_s
        self._runners = dict(runners or {})
        self._folders: dict[str, str] = {}
        self._notices: dict[tuple[str, str], str] = {}
        """The drain notice written for each job (login host, job id): its path."""

    # where the commands run

    def _host(self, name: str) -> Host:
        host = self.hosts.get(name)
        if host is None:
            raise LaunchError(f"no host {name!r} to submit the server's job from")
        return host

    def jobs(self, host_name: str) -> SlurmJobs:
        """The Slurm commands on `host_name`'s machine (here, or its login node over SSH)."""
        if host_name not in self._runners:
            host = self._host(host_name)
            if isinstance(host, SSHHost):
                self._runners[host_name] = ssh_runner(host.connection, host.name)
            else:
                self._runners[host_name] = local_runner(COMMAND_TIMEOUT_S)
        return SlurmJobs(self._runners[host_name])

    @staticmethod
    def _log_in(recipe: ServerRecipe, folder: str) -> str:
        return recipe.log or f"{folder}/{recipe.name}.log"

    async def log_of(self, recipe: ServerRecipe) -> str:
        return self._log_in(recipe, await self._folder(recipe.host))

    async def _folder(self, host_name: str) -> str:
        """The logs' folder on the login node, absolute (sbatch's --output must be): a
        remote login folder is asked once (`pwd`, where every SSH command starts)."""
        if host_name in self._folders:
            return self._folders[host_name]
        host = self._host(host_name)
        if isinstance(host, LocalHost):
            folder = self.local_folder
        else:
            rc, out, err = await self._runners_of(host_name)(["pwd"])
            home = out.strip()
            if rc != 0 or not home.startswith("/") or "\n" in home:
                raise SlurmError(f"{host_name}: no login folder ({one_line(err or out, 200)})")
            folder = f"{home.rstrip('/')}/{self.remote_folder}"
        self._folders[host_name] = folder
        return folder

    def _runners_of(self, host_name: str) -> Runner:
        self.jobs(host_name)
        return self._runners[host_name]

    # the launcher

    async def start(self, recipe: ServerRecipe) -> Launched:
        """Submit the job, then wait (as long as the queue takes) until it runs."""
        host = self._host(recipe.host)
        jobs = self.jobs(recipe.host)
        options = dict(recipe.slurm)
        try:
            folder = await self._folder(recipe.host)
            await host.make_folder(folder)
            spec = BatchSpec(
                name=recipe.name,
                argv=recipe.argv,
                log=self._log_in(recipe, folder),
                env={**recipe.environment, MARKER: recipe.name},
                partition=options.get("partition"),
                gpus=int(options.get("gpus", 0)),
                time=options.get("time"),
                workdir=recipe.cwd,
            )
            job_id = await jobs.submit(spec)
        except SlurmError as exc:
            raise LaunchError(one_line(str(exc), 600)) from None
        except (SSHError, RunError, OSError) as exc:
            raise LaunchError(
                f"server {recipe.name}: {recipe.host}: the logs' folder could not be made "
                f"({one_line(str(exc), 300)}); nothing was submitted"
            ) from None
        launched = Launched(recipe.name, job_id, recipe.host, recipe.port, time.time(), spec.log)
        # Noted while it waits in the queue: a gen-tui that quits meanwhile adopts it.
        self.state.note_launch(KIND, launched)
        while True:
            try:
                status = await jobs.status(job_id)
            except SlurmError:  # asked again: a failed command is not the job's end
                status = JobStatus(job_id, "PENDING")
            if status is None or status.ended:
                said = "is gone from the queue" if status is None else ended_words(status)[0]
                last = await self.last_line(launched)
                raise LaunchError(
                    f"server {recipe.name}: job {job_id} {said} before it ran; its log's last "
                    f"line: {last or '(empty)'}"
                )
            if status.running:
                launched = replace(launched, node=status.node, started_at=time.time())
                self.state.note_launch(KIND, launched)
                return launched
            await asyncio.sleep(self.poll_s)

    async def exit_of(self, launched: Launched) -> Exit | None:
        try:
            status = await self.jobs(launched.host).status(launched.ref)
        except SlurmError:  # the controller or the link, not the job: asked again next time
            return None
        if status is not None and not status.ended:
            return None
        last = await self.last_line(launched) or "-"
        if status is None:
            return Exit(
                reason=f"job {launched.ref} is gone: neither squeue nor sacct knows it (how it "
                f"ended is unknown); its log's last line: {last}"
            )
        words, final = ended_words(status)
        return Exit(
            status.exit_code,
            status.signal or None,
            f"job {launched.ref} {words}; its log's last line: {last}",
            state=status.state,
            final=final,
        )

    async def _until_ended(self, jobs: SlurmJobs, job_id: str, within_s: float) -> JobStatus | None:
        """Poll until the job has ended (or is unknown); its last status either way."""
        deadline = time.monotonic() + within_s
        status: JobStatus | None = None
        while True:
            with contextlib.suppress(SlurmError):
                status = await jobs.status(job_id)
                if status is None or status.ended:
                    return status
            if time.monotonic() >= deadline:
                return status
            await asyncio.sleep(min(self.poll_s, 0.5))

    async def stop(self, launched: Launched, grace_s: float) -> str:
        """TERM to the server (it drains), then after `grace_s` scancel of the job."""
        jobs = self.jobs(launched.host)
        job = f"job {launched.ref}"
        try:
            status = await jobs.status(launched.ref)
            if status is None or status.ended:
                return f"{job} had already ended"
            if status.running:
                await jobs.cancel(launched.ref, signal="TERM")
                status = await self._until_ended(jobs, launched.ref, grace_s)
            if status is not None and not status.ended:
                await jobs.cancel(launched.ref)
                status = await self._until_ended(jobs, launched.ref, END_WAIT_S)
        except SlurmError as exc:
            return f"{job}: not stopped: {one_line(str(exc), 400)}"
        if status is not None and not status.ended:
            return f"{job} cancelled, still {status.state} after {END_WAIT_S:g} s"
        return f"{job} stopped ({'gone from the queue' if status is None else status.state})"

    async def tell_drain(self, launched: Launched, url: str, wait_s: float, grace_s: float) -> bool:
        """The notice `PORT@NODE.json` (backends/drain_notice.py) in the servers' folder on
        the login node, where the job's log is: the job writes its log there from its node,
        so the nodes share that folder (the user's home), and a run in a job of its own (or
        on the login node) sent to `http://NODE:PORT` reads it in its own state folder. Not
        for a job still queued (nothing sent to it yet) or a URL whose host names no node."""
        node = notice_node(url)
        if launched.node is None or node is None:
            return False
        folder = posixpath.join(await self._folder(launched.host), NOTICE_FOLDER)
        text = notice_text(launched.port, url, wait_s, grace_s, node)
        host = self._host(launched.host)
        path = await host.put_drain_notice(folder, notice_name(launched.port, node), text)
        self._notices[(launched.host, launched.ref)] = path
        return True

    async def end_drain(self, launched: Launched) -> None:
        path = self._notices.pop((launched.host, launched.ref), None)
        if path is None and launched.node is not None:  # told by an earlier gen-tui
            folder = posixpath.join(await self._folder(launched.host), NOTICE_FOLDER)
            path = posixpath.join(folder, notice_name(launched.port, launched.node.lower()))
        if path is not None:
            folder, name = posixpath.split(path)
            await self._host(launched.host).remove_drain_notice(folder, name)

    async def adopt(self) -> list[Launched]:
        """Our jobs still queued or running, by the marker in their job name: the launch
        the state file holds for the same job id, else one made from its recipe. A login
        node that cannot be asked keeps the state file's launches (never a second copy
        on busy GPUs); the next check asks again."""
        entries = self.state.read()
        found: list[Launched] = []
        for host_name in sorted({recipe.host for recipe in self.recipes}):
            mine = [recipe for recipe in self.recipes if recipe.host == host_name]
            noted = {
                name: entry.launched
                for name, entry in entries.items()
                if entry.launcher == KIND
                and entry.launched is not None
                and entry.launched.host == host_name
            }
            try:
                listing = await self.jobs(host_name).ours()
            except (SlurmError, LaunchError):
                found += [noted[r.name] for r in mine if r.name in noted]
                continue
            for recipe in mine:
                live = [
                    job
                    for job in listing.jobs
                    if job.recipe == recipe.name and job.state not in ENDED_STATES
                ]
                if not live:
                    continue
                before = noted.get(recipe.name)
                job = next((j for j in live if before and j.job_id == before.ref), live[0])
                if before is not None and before.ref == job.job_id:
                    found.append(replace(before, node=job.node or before.node))
                else:
                    try:
                        folder = await self._folder(host_name)
                    except SlurmError:
                        folder = self.remote_folder
                    found.append(
                        Launched(
                            recipe.name,
                            job.job_id,
                            host_name,
                            recipe.port,
                            time.time(),
                            self._log_in(recipe, folder),
                            node=job.node,
                        )
                    )
        return found

    async def last_line(self, launched: Launched) -> str:
        try:
            lines = await self._host(launched.host).log_lines(launched.log, 20)
        except Exception as exc:  # the log is a courtesy: a lost link must not hide the error
            return f"(its log could not be read: {type(exc).__name__})"
        return last_of(lines)

    async def log_size(self, launched: Launched) -> int | None:
        try:
            return await self._host(launched.host).file_size(launched.log)
        except Exception:  # unknown: the deadline is then not stretched
            return None
