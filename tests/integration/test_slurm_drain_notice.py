"""A run started by a Slurm job of its own is told of a Slurm server's drain (issue 32).

The server is a batch job (`gen-tui sim` through the Slurm launcher, followed by its
supervisor); the run is another batch job, `gen-tui run` sent straight to the server's
`http://NODE:PORT` and to a second server (no router, no panel link to its node). Stopping
the server drains it first: the launcher writes `PORT@NODE.json` in the servers' folder on
the login node, where the job's log is (a folder the nodes share), and the run, reading its
own state folder, sends the server nothing new: the drain ends as soon as its requests in
flight have, not at `drain_s`, and the run ends at its budget on the other server with
nothing lost. Before, the Slurm launcher wrote no notice ("its runs" were not told) and the
drain waited its whole `drain_s` with the run still sending (8 s: "N request(s) still in
flight after 8 s"; now about 1 s).

The cluster is the one-node Slurm of `.ci/slurm-up` (skipped, saying why, when it is not
up): its node is this machine, as the login node is.
"""

from __future__ import annotations

import asyncio
import re
import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gen_tui.backends.drain_notice import NOTICE_FOLDER, read_notices
from gen_tui.backends.hosts import LocalHost
from gen_tui.backends.servers.events import ServerState
from gen_tui.backends.servers.slurm_launcher import SlurmLauncher
from gen_tui.backends.servers.state import StateFile
from gen_tui.backends.servers.supervisor import ServerSupervisor
from tests.support.ports import free_port
from tests.support.records import progress, recount
from tests.support.runs import ENV, GEN_TUI, run_args
from tests.support.servers import Recorder, sim_recipe
from tests.support.slurm import Cluster, job_state

pytestmark = pytest.mark.timeout(300)
BUDGET = 60_000
DRAIN_S = 8.0


def _submit_run(args: list[str], state: Path, log: Path, workdir: Path) -> str:
    """`gen-tui ARGS` as a batch job of its own (the user's, not the panel's): its id."""
    command = shlex.join([*GEN_TUI, *args])
    done = subprocess.run(
        ["sbatch", "--parsable", f"--output={log}", f"--chdir={workdir}", "--job-name=t-run",
         "--time=10", "--wrap", command],
        capture_output=True, text=True, timeout=30, check=True,
        env={**ENV, "XDG_STATE_HOME": str(state)},
    )  # fmt: skip
    return done.stdout.strip().split(";")[0]


async def test_a_run_in_a_slurm_job_is_told_of_a_slurm_server_s_drain(
    slurm: Cluster,
    prefix: str,
    tmp_path: Path,
    tokenizer_dir: Path,
    prompts_dir: Callable[..., Path],
    vocab_size: int,
    sim: Any,
    http: aiohttp.ClientSession,
) -> None:
    state = tmp_path / "state"
    folder = state / "gen-tui" / "servers"  # the servers' folder on the login node
    folder.mkdir(parents=True)
    recipe = sim_recipe(
        f"{prefix}a", free_port(), "--tokens-per-s", "400", "--vocab-size", str(vocab_size),
        launcher="slurm", drain_s=DRAIN_S,
        slurm=(("partition", slurm.partition), ("time", "30")),
    )  # fmt: skip
    launcher = SlurmLauncher(
        {"local": LocalHost(folder)}, str(folder), StateFile(folder), [recipe], poll_s=0.2
    )
    recorder = Recorder()
    supervisor = ServerSupervisor(
        recipe, recipe.url(), launcher, launcher.state, http, [recorder], check_s=0.2, grace_s=5
    )
    other = await sim(tokens_per_s=400, slots=16)
    run_job = ""
    supervisor.start()
    try:
        await recorder.reach(ServerState.HEALTHY, timeout=120)
        url = supervisor.base_url
        assert url == f"http://{slurm.node}:{recipe.port}", url
        out = tmp_path / "out"
        args = run_args(
            tokenizer_dir, prompts_dir(A=2000), out, url,
            "--server-url", other.url, "--max-tokens-per-dataset", str(BUDGET),
            "--max-new-tokens", "400", "--concurrency", "8",
        )  # fmt: skip
        log = tmp_path / "run.log"
        run_job = _submit_run(args, state, log, tmp_path)
        raw = out / "A" / "raw_responses.jsonl"
        while not (raw.exists() and raw.stat().st_size > 0):
            assert job_state(run_job) in ("PENDING", "RUNNING", "CONFIGURING"), log.read_text()
            await asyncio.sleep(0.1)

        said = await supervisor.stop()  # drain first, then TERM and scancel
        draining = recorder.last(ServerState.DRAINING).detail
        assert "its runs told" in draining, draining
        drained = re.search(r"drained in ([0-9.]+) s", said)
        assert drained is not None, said  # not "N request(s) still in flight after 8 s"
        assert float(drained.group(1)) < DRAIN_S / 2, said
        notices = read_notices(folder / NOTICE_FOLDER)
        assert notices.on_nodes == {} and notices.bad == (), notices  # gone with the stop

        while job_state(run_job) not in ("", "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"):
            await asyncio.sleep(0.2)
        text = log.read_text()
        assert f"{url} is being drained before a stop" in text, text[-3000:]
        tokens, records = recount(out / "A")  # asserts no sample_id twice
        dataset = progress(out / "A")
        assert dataset["state"] == "done", text[-3000:]
        assert (dataset["tokens"], dataset["samples"]) == (tokens, records)  # nothing lost
        assert tokens >= BUDGET and dataset["errors"] == 0 and dataset["malformed"] == 0
        print(f"{said}; the run: {records} records, {tokens} tokens, {draining}")
    finally:
        if run_job:
            subprocess.run(["scancel", run_job], timeout=30, check=False)
        await supervisor.stop()
