"""What the Slurm launcher makes of Slurm's answers (issue 32), where the real one-node Slurm
cannot be made to say them on demand: a controller that does not answer, a job no command
knows any more, a job at its time limit (TIMEOUT, a minute at least on a real cluster).

The answers are Slurm's own spelling (squeue's `%T %N`, `scontrol show job -o`, sacct's
`-P` lines, the errors' words), read by the real parsers; the server behind the job is a
real simulator on loopback, and the supervisor is the real one. The same launcher against
the real Slurm is tests/integration/test_slurm_servers.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import aiohttp

from gen_tui.backends.config.server_recipe import RestartPolicy, ServerRecipe
from gen_tui.backends.hosts import LocalHost
from gen_tui.backends.servers.events import ServerState
from gen_tui.backends.servers.launcher import Launched
from gen_tui.backends.servers.slurm import SlurmError
from gen_tui.backends.servers.slurm_launcher import SlurmLauncher
from gen_tui.backends.servers.state import StateFile
from gen_tui.backends.servers.supervisor import ServerSupervisor
from gen_tui.backends.sim.server import SimServer
from tests.support.polling import wait_until
from tests.support.servers import Recorder

S = ServerState
UNREACHABLE = "slurm_load_jobs error: Unable to contact slurm controller (connect failure)"
UNKNOWN = "slurm_load_jobs error: Invalid job id specified"


class ScriptedSlurm:
    """Slurm's answers for job 7, its state set by the test (None: no command knows it)."""

    def __init__(self) -> None:
        self.state: str | None = "RUNNING"
        self.exit = "0:0"
        self.down = False
        self.dropped = False
        self.calls: list[list[str]] = []

    async def __call__(self, argv: Sequence[str]) -> tuple[int, str, str]:
        self.calls.append(list(argv))
        if self.dropped:
            raise SlurmError("login: the link failed while asking Slurm (Connection lost)")
        if self.down and argv[0] in ("squeue", "scontrol", "sacct"):
            return 1, "", UNREACHABLE
        command = argv[0]
        if command == "sbatch":
            return 0, "7\n", ""
        if command == "scancel":
            self.state = "CANCELLED"
            return 0, "", ""
        if command == "sacct":
            return 0, "", ""
        if self.state is None:
            return 1, "", UNKNOWN
        if command == "squeue":
            return 0, f"{self.state} 127.0.0.1\n", ""
        assert command == "scontrol", argv
        return 0, f"JobId=7 JobState={self.state} ExitCode={self.exit} NodeList=127.0.0.1\n", ""

    def submitted(self) -> int:
        return sum(1 for call in self.calls if call[0] == "sbatch")


def _launcher(tmp_path: Path, slurm: ScriptedSlurm, recipe: ServerRecipe) -> SlurmLauncher:
    return SlurmLauncher(
        {"local": LocalHost(tmp_path)},
        str(tmp_path),
        StateFile(tmp_path),
        [recipe],
        poll_s=0.05,
        runners={"local": slurm},
    )


def _recipe(port: int) -> ServerRecipe:
    return ServerRecipe(
        "gpu0",
        ("serve",),
        port,
        launcher="slurm",
        startup_s=10.0,
        unhealthy_s=2.0,
        restart=RestartPolicy(3, 0.1, 0.2),
    )


async def test_what_is_an_exit_and_what_is_not(tmp_path: Path) -> None:
    slurm = ScriptedSlurm()
    launcher = _launcher(tmp_path, slurm, _recipe(1))
    (tmp_path / "gpu0.log").write_text("loading\nKilled by the OOM killer\n")
    job = Launched("gpu0", "7", "local", 1, 0.0, str(tmp_path / "gpu0.log"), node="127.0.0.1")

    assert await launcher.exit_of(job) is None  # running
    slurm.down = True  # the controller does not answer: not an exit
    assert await launcher.exit_of(job) is None
    slurm.down, slurm.dropped = False, True  # nor is a dropped link to the login node
    assert await launcher.exit_of(job) is None

    slurm.dropped, slurm.state, slurm.exit = False, "FAILED", "137:0"
    failed = await launcher.exit_of(job)
    assert failed is not None and (failed.code, failed.signal, failed.state) == (
        137,
        None,
        "FAILED",
    )
    assert failed.reason == (
        "job 7 ended FAILED, exit code 137 on 127.0.0.1; its log's last line: "
        "Killed by the OOM killer"
    )
    assert not failed.final  # restarted like a crashed process

    slurm.state, slurm.exit = "TIMEOUT", "0:15"
    timeout = await launcher.exit_of(job)
    assert timeout is not None and timeout.final and timeout.state == "TIMEOUT"
    assert timeout.reason.startswith("job 7 reached its time limit (TIMEOUT): not restarted;")

    slurm.state = None  # squeue and scontrol no longer hold it, sacct has no record
    gone = await launcher.exit_of(job)
    assert gone is not None and (gone.code, gone.signal, gone.state) == (None, None, None)
    assert gone.reason.startswith(
        "job 7 is gone: neither squeue nor sacct knows it (how it ended is unknown)"
    )


async def _supervised(
    tmp_path: Path, http: aiohttp.ClientSession, sim: Callable[..., object]
) -> tuple[ScriptedSlurm, ServerSupervisor, Recorder]:
    server = await sim()
    assert isinstance(server, SimServer)
    recipe = _recipe(int(server.url.rsplit(":", 1)[1]))
    slurm = ScriptedSlurm()
    launcher = _launcher(tmp_path, slurm, recipe)
    recorder = Recorder()
    supervisor = ServerSupervisor(
        recipe,
        "http://unused.invalid:1",  # a job answers on its node: 127.0.0.1 here
        launcher,
        launcher.state,
        http,
        [recorder],
        kind="slurm",
        check_s=0.1,
        grace_s=0.5,
    )
    supervisor.start()
    healthy = await recorder.reach(S.HEALTHY)
    assert healthy.ref == "7"
    loading = recorder.last(S.LOADING).detail
    assert loading == f"job 7 on 127.0.0.1, waiting for {server.url}/health"
    return slurm, supervisor, recorder


async def test_a_job_at_its_time_limit_is_said_so_and_not_resubmitted(
    tmp_path: Path, http: aiohttp.ClientSession, sim: Callable[..., object]
) -> None:
    slurm, supervisor, recorder = await _supervised(tmp_path, http, sim)
    slurm.state = "TIMEOUT"
    assert await supervisor.wait() is S.STOPPED
    assert recorder.last(S.STOPPED).detail.startswith(
        "job 7 reached its time limit (TIMEOUT): not restarted"
    )
    assert S.RESTARTING not in recorder.states() and slurm.submitted() == 1
    assert StateFile(tmp_path).read()["gpu0"].launched is None  # not adopted next time


async def test_a_controller_that_does_not_answer_restarts_nothing(
    tmp_path: Path, http: aiohttp.ClientSession, sim: Callable[..., object]
) -> None:
    slurm, supervisor, recorder = await _supervised(tmp_path, http, sim)
    slurm.down = True
    asked = len(slurm.calls)
    await wait_until(lambda: len(slurm.calls) >= asked + 10, 10, "ten more questions")
    assert recorder.states() == [S.STARTING, S.LOADING, S.HEALTHY]  # no exit, no restart
    slurm.down = False
    slurm.state = "FAILED"  # and once it answers, an end is an end: resubmitted
    exited = await recorder.reach(S.EXITED)
    assert exited.detail.startswith("job 7 ended FAILED, exit code 0 on 127.0.0.1")
    await recorder.reach(S.RESTARTING)
    await supervisor.stop()


async def test_a_job_stopped_while_queued_is_cancelled_not_left_in_the_queue(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    slurm = ScriptedSlurm()
    slurm.state = "PENDING"
    recipe = _recipe(1)
    launcher = _launcher(tmp_path, slurm, recipe)
    supervisor = ServerSupervisor(
        recipe, recipe.url(), launcher, launcher.state, http, kind="slurm", check_s=0.1
    )
    supervisor.start()
    await wait_until(lambda: slurm.submitted() == 1 and slurm.calls[-1][0] == "squeue", 10)
    said = await supervisor.stop(0.2)
    assert said == "server gpu0: job 7 stopped (CANCELLED)"
    assert ["scancel", "7"] in slurm.calls and ["scancel", "--full", "--signal=TERM", "7"] not in (
        slurm.calls
    )  # a job that never ran gets no TERM of its own, only the cancel
    assert StateFile(tmp_path).read()["gpu0"].launched is None
