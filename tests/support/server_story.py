"""The story of issue 32's "Done when", as the tests play it: two servers and a router
started from the recipes of a gen-tui.toml by `gen-tui servers up` (the panel's own fleet,
headless), a real `gen-tui run` through the router with a budget, `kill -9` of one
server's process while the run writes, and what must follow: the server seen exited
(SIGKILL), restarting, healthy again; the router's list without it, then with it again;
the run ending at its budget with every record once; the `[alerts]` target told
"server ... exited" and "... healthy again".

The servers differ (`gen-tui sim` in tests/integration/test_server_story.py, the real
SGLang 0.5.23 on the CPU in tests/integration/test_real_sglang_servers.py); the story
and its checks are the same, here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from gen_tui.backends.config.server_recipe import ServerRecipe
from gen_tui.backends.demo import write_prompts
from gen_tui.backends.servers.router import listed
from gen_tui.backends.servers.state import StateFile
from tests.support.polling import wait_until
from tests.support.records import budget_end, read_records, record_lines
from tests.support.router import get_json
from tests.support.runs import ENV, GEN_TUI, finish, run_args
from tests.support.servers import Lines, gen_tui_in, kill_servers, still_running

EXITED_WITHIN_S = 30.0
"""The issue's bound: the servers view shows the killed server exited within 30 s."""


def _toml(value: object) -> str:
    """A TOML value for a string, number or list of strings (JSON's escapes are TOML's)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    raise TypeError(f"no TOML for {value!r}")


def recipe_table(header: str, recipe: ServerRecipe) -> str:
    """`recipe` as the `[[servers]]` (or `[router]`) table a user writes."""
    lines = [header]
    if header == "[[servers]]":
        lines.append(f"name = {_toml(recipe.name)}")
    values: dict[str, object] = {
        "argv": list(recipe.argv),
        "port": recipe.port,
        "startup_s": recipe.startup_s,
        "unhealthy_s": recipe.unhealthy_s,
        "drain_s": recipe.drain_s,
        "max_restarts_per_hour": recipe.restart.max_per_hour,
        "backoff_s": recipe.restart.backoff_s,
        "backoff_max_s": recipe.restart.backoff_max_s,
    }
    if recipe.launcher != "process":
        values["launcher"] = recipe.launcher
    if recipe.address is not None:
        values["address"] = recipe.address
    lines += [f"{key} = {_toml(value)}" for key, value in values.items()]
    if recipe.env:
        env = ", ".join(f"{name} = {_toml(value)}" for name, value in recipe.env)
        lines.append(f"env = {{ {env} }}")
    if recipe.slurm:
        lines.append(f"[{header.strip('[]')}.slurm]")
        lines += [f"{key} = {_toml(value)}" for key, value in recipe.slurm]
    return "\n".join(lines) + "\n"


def story_config(
    path: Path, workers: list[ServerRecipe], router: ServerRecipe, alert_url: str
) -> Path:
    """A gen-tui.toml with `workers` as `[[servers]]`, `router` as `[router]`, and an
    `[alerts]` target that hears the servers' events."""
    tables = [recipe_table("[[servers]]", recipe) for recipe in workers]
    tables.append(recipe_table("[router]", router))
    tables.append(f'[alerts]\nurls = [{_toml(alert_url)}]\nevents = ["server"]\n')
    path.write_text("\n".join(tables))
    return path


SIM_FLAGS = ("--slots", "16", "--tokens-per-s", "200", "--default-mean", "200")
"""A `gen-tui sim` worker of the sim stories (local and Slurm): 16 slots of 200 tok/s,
answers of ~200 tokens, so a 40k budget is still being written when the crash comes."""


@dataclass(frozen=True)
class StorySetup:
    """A story's files: its gen-tui.toml, its prompts' ids and the run's arguments."""

    config: Path
    ids: set[str]
    out: Path
    """The run's output folder: its one dataset is `out / "A"`."""
    run_args: list[str]


def story_setup(
    folder: Path,
    workers: list[ServerRecipe],
    router: ServerRecipe,
    alert_url: str,
    tokenizer: Path,
    prompts: int,
    *flags: str,
) -> StorySetup:
    """In `folder`: the gen-tui.toml of `workers` and `router` (`story_config`), `prompts`
    prompts of dataset A, and a `gen-tui run` through the router (16 at a time, `flags`)."""
    config = story_config(folder / "gen-tui.toml", workers, router, alert_url)
    prompt_dir = folder / "prompts"
    write_prompts(prompt_dir / "A.jsonl", prompts)
    ids = {str(json.loads(line)["id"]) for line in (prompt_dir / "A.jsonl").open()}
    out = folder / "out"
    args = run_args(tokenizer, prompt_dir, out, router.url(), "--concurrency", "16", *flags)
    return StorySetup(config, ids, out, args)


async def none_left_running(state: Path) -> None:
    """Waits (10 s at most) until no server `play` started under `state` runs: the router
    too (retitled)."""
    servers = state / "gen-tui" / "servers"
    await wait_until(lambda: not still_running(servers), 10, "no server left running",
                     detail=lambda: str(still_running(servers)))  # fmt: skip


def sims_completed(workers: list[ServerRecipe]) -> Callable[[], list[str]]:
    """A `play` ledger: the sample ids the `gen-tui sim` workers answered whole."""
    return lambda: [rid for worker in workers for rid in sim_completed(worker.url())]


def check_sim_story(end: StoryEnd, setup: StorySetup, budget: int) -> tuple[int, int, float]:
    """The end of a story of sim workers: the run exited 0 with every record once, every
    answer the workers completed written, its budget crossed; (tokens, records, allowed)
    for `precision_or_xfail`."""
    assert end.code == 0, end.stderr[-2000:]
    written = check_once(setup.out / "A", setup.ids)
    live = end.ledger
    assert live, "the workers answered nothing after the crash"
    unwritten = set(live) - set(written)
    assert not unwritten, f"{len(unwritten)} answer(s) the servers completed were not written"
    return budget_end(setup.out / "A", budget)


def server_pid(folder: Path, name: str) -> int | None:
    """The pid gen-tui's state file gives the server `name` (None: none launched)."""
    entry = StateFile(folder).read().get(name)
    launched = entry.launched if entry else None
    return None if launched is None or launched.identity is None else launched.identity.pid


def server_job(folder: Path, name: str) -> int | None:
    """The Slurm job id gen-tui's state file gives the server `name` (None: none yet)."""
    entry = StateFile(folder).read().get(name)
    launched = entry.launched if entry else None
    return None if launched is None or not launched.ref.isdigit() else int(launched.ref)


@dataclass(frozen=True)
class Crash:
    """How the story crashes its victim: `ref` reads its pid (or job id) from the state
    folder, `act` crashes it and returns what its `exited` line must say."""

    ref: Callable[[Path, str], int | None]
    act: Callable[[int], str]


def _kill_9(pid: int) -> str:
    os.kill(pid, signal.SIGKILL)  # the server's own process, as an OOM kill would
    return f"pid {pid} was killed by SIGKILL"


def _scancel(job: int) -> str:
    subprocess.run(["scancel", str(job)], check=True, timeout=30)  # a cluster's crash
    return f"job {job} ended CANCELLED"


KILL_9 = Crash(server_pid, _kill_9)
SCANCEL = Crash(server_job, _scancel)


def router_list(router_url: str) -> set[str]:
    """The worker URLs the router lists right now (empty: it does not answer)."""
    return set(listed(get_json(f"{router_url}/workers")))


@dataclass
class StoryEnd:
    """What the story saw, for the test's own checks (ledgers, budgets) and its report."""

    code: int
    stdout: str
    stderr: str
    killed_pid: int
    killed_at: float
    """Wall-clock time (time.time()) of the kill."""
    records_at_kill: int
    exited_after_s: float
    """From the kill to the `exited` line of `gen-tui servers up`."""
    healthy_again_after_s: float
    relisted_after_s: float
    run_s: float
    lines: list[str] = field(default_factory=list)
    """`gen-tui servers up`'s lines."""
    alerts: list[dict[str, Any]] = field(default_factory=list)
    ledger: Any = None
    """What `ledger` said once the run was over, the servers still up."""


async def play(
    *,
    config: Path,
    state: Path,
    workers: list[ServerRecipe],
    router: ServerRecipe,
    run_args: list[str],
    out: Path,
    victim: str,
    kill_at_records: int,
    alerts: list[dict[str, Any]],
    load_s: float,
    run_s: float,
    ledger: Callable[[], Any] = lambda: None,
    crash: Crash = KILL_9,
) -> StoryEnd:
    """The story (see the module's docstring), its waits bounded by `load_s` (a server's
    start) and `run_s` (the run); asserts each step and returns what it saw, with what
    `ledger()` (what the servers answered) says once the run is over. Leaves no server
    nor run behind, whatever happens."""
    folder = state / "gen-tui" / "servers"
    urls = {recipe.name: recipe.url() for recipe in [*workers, router]}
    up = await gen_tui_in(state, "servers", "--config", str(config), "up")
    lines = Lines(up)
    run: asyncio.subprocess.Process | None = None
    finishing: asyncio.Task[tuple[int, str, str]] | None = None

    def said() -> str:
        listing = sorted(router_list(urls[router.name]))
        return "\n".join([*lines.lines[-40:], f"router lists {listing}"])

    try:
        await lines.wait(f"server {router.name} healthy", timeout=2 * load_s + 120)
        everyone = {urls[recipe.name] for recipe in workers}
        await wait_until(lambda: router_list(urls[router.name]) == everyone, 60,
                         "every worker on the router's list", detail=said)  # fmt: skip
        began = time.monotonic()
        run = await asyncio.create_subprocess_exec(
            *GEN_TUI, *run_args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env=ENV, start_new_session=True,
        )  # fmt: skip
        finishing = asyncio.create_task(finish(run, timeout=run_s))  # drains its pipes
        await wait_until(
            lambda: record_lines(out) >= kill_at_records or finishing.done(),
            run_s,
            f"{kill_at_records} records written",
        )
        assert not finishing.done(), f"the run ended before the kill: {finishing.result()}"
        pid = crash.ref(folder, victim)
        assert pid is not None, said()
        at_kill = record_lines(out)
        signal_at, killed_at = time.monotonic(), time.time()
        how = crash.act(pid)
        exited = await lines.wait(f"server {victim} exited", timeout=EXITED_WITHIN_S)
        exited_after = time.monotonic() - signal_at
        assert how in exited, exited
        assert not finishing.done(), "the run ended before its server's exit was seen"
        await wait_until(lambda: urls[victim] not in router_list(urls[router.name]), 30,
                         f"{victim} off the router's list", detail=said)  # fmt: skip
        await lines.wait(f"server {victim} restarting", timeout=30)
        again = await lines.wait(f"server {victim} healthy", "healthy again", timeout=load_s)
        healthy_after = time.monotonic() - signal_at
        await wait_until(lambda: router_list(urls[router.name]) == everyone, 60,
                         f"{victim} back on the router's list", detail=said)  # fmt: skip
        relisted_after = time.monotonic() - signal_at
        code, stdout, stderr = await finishing
        took = time.monotonic() - began
        new_pid = crash.ref(folder, victim)
        assert new_pid not in (None, pid), (pid, new_pid, again)
        await wait_until(
            lambda: all(_alerted(alerts, victim, words) for words in ("exited", "healthy again")),
            30,
            "the alerts of the exit and the return",
            detail=lambda: json.dumps(alerts, indent=1)[-3000:],
        )
        return StoryEnd(
            code, stdout, stderr, pid, killed_at, at_kill, exited_after, healthy_after,
            relisted_after, took, list(lines.lines), list(alerts), ledger(),
        )  # fmt: skip
    finally:
        if finishing is not None and not finishing.done():
            finishing.cancel()
        if run is not None and run.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                run.kill()
            await run.wait()
        if up.returncode is None:
            up.send_signal(signal.SIGINT)  # leaves the servers running: killed next
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(up.wait(), 30)
        if up.returncode is None:
            up.kill()
            await up.wait()
        lines.task.cancel()
        kill_servers(folder)


def _alerted(alerts: list[dict[str, Any]], name: str, words: str) -> bool:
    return any(
        f"server {name} " in str(alert.get("message", "")) and words in str(alert.get("message"))
        for alert in alerts
    )


def sim_completed(url: str) -> list[str]:
    """The sample ids the simulator at `url` answered whole (its rids), since it started."""
    with urllib.request.urlopen(f"{url}/_sim/stats", timeout=10) as answer:
        rids = json.load(answer)["completed_rids"]
    return ["/".join(rid.split("/")[1:-1]) for rid in rids]


def written_ids(folder: Path) -> Counter[str]:
    """Each record's sample id in `folder`, counted."""
    return Counter(str(record["sample_id"]) for record in read_records(folder))


def check_once(folder: Path, prompts: set[str]) -> Counter[str]:
    """Assert no sample is written twice and every one is a prompt's; the ids counted."""
    ids = written_ids(folder)
    twice = [key for key, count in ids.items() if count > 1]
    assert not twice, f"{len(twice)} sample(s) written twice: {twice[:5]}"
    strangers = set(ids) - prompts
    assert not strangers, f"records of no prompt: {sorted(strangers)[:5]}"
    return ids


def sample_of(rid: str) -> str | None:
    """The sample id of an engine rid `DATASET/SAMPLE/HEX` (None for another's rid, such
    as the 1-token generation SGLang's own /health runs, `HEALTH_CHECK_...`)."""
    parts = rid.split("/")
    return "/".join(parts[1:-1]) if len(parts) >= 3 else None


def finished_in_sglang_log(folder: Path, before: float | None = None) -> Counter[str]:
    """The samples a real SGLang server finished (not aborted), counted, from its JSON
    request log (`--log-requests --log-requests-format json --log-requests-target FOLDER`:
    one `[time] {...}` line per event, "request.finished" with the rid and meta_info);
    only those finished before the wall-clock time `before` when it is given."""
    done: Counter[str] = Counter()
    for path in sorted(folder.glob("*.log*")):
        for line in path.read_text(errors="replace").splitlines():
            _, _, body = line.partition("] ")
            try:
                event = json.loads(body)
            except ValueError:
                continue
            if not isinstance(event, dict) or event.get("event") != "request.finished":
                continue
            reason = (event.get("out") or {}).get("meta_info", {}).get("finish_reason")
            kind = reason.get("type") if isinstance(reason, dict) else reason
            sample = sample_of(event["rid"]) if isinstance(event.get("rid"), str) else None
            if kind not in ("length", "stop") or sample is None:
                continue
            if before is not None and datetime.fromisoformat(event["timestamp"]) >= (
                datetime.fromtimestamp(before)
            ):  # SGLang's stamp: datetime.now(), local and naive
                continue
            done[sample] += 1
    return done
