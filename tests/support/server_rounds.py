"""The rounds of the chaos scenarios that crash a supervised server under a run (issue 32):
`tests/chaos/test_server_kills.py` (SIGKILL of the process) and
`tests/chaos/test_slurm_cancels.py` (`scancel` of the job) crash it the same way, each
round once the run has written its share, and wait for the supervisor to bring it back
under a new pid or job id."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol, TypeVar

from tests.support.polling import wait_until_sync
from tests.support.runs import GEN_TUI

Ref = TypeVar("Ref")


class Run(Protocol):
    """A `gen-tui run` child (tests/chaos/procs.py's RunProcess)."""

    def alive(self) -> bool: ...
    def signal(self, sig: int) -> None: ...


def crash_each_round(
    run: Run,
    rounds: int,
    count: int,
    records: Callable[[], int],
    first: Ref,
    crash: Callable[[Ref], None],
    current: Callable[[], Ref | None],
    up_log: Path,
) -> list[Ref]:
    """Each round, once `records()` reaches its share of `count` (or the run ended),
    `crash` the server's current ref and wait until `current()` gives a new one; every
    ref seen, `first` first (fewer rounds when the run ended before)."""
    refs = [first]
    for index in range(rounds):
        target = (index + 1) * count // (rounds + 2)
        wait_until_sync(
            lambda t=target: records() >= t or not run.alive(),
            120,
            f"{target} records (or the run's end)",
        )
        if not run.alive():
            break
        crash(refs[-1])
        refs.append(
            wait_until_sync(
                lambda: (ref := current()) not in (None, refs[-1]) and ref,
                60,
                "the server back under a new pid or job",
                detail=lambda: up_log.read_text()[-2000:],
            )
        )
    return refs


def servers_up(config: Path, env: Mapping[str, str], log: Path) -> subprocess.Popen[bytes]:
    """`gen-tui servers up` of `config` in a session of its own, its output in `log` (the
    state folder is `env`'s XDG_STATE_HOME); `end_servers_up` ends it."""
    with open(log, "wb") as out:
        return subprocess.Popen(
            [*GEN_TUI, "servers", "--config", str(config), "up"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(env),
            start_new_session=True,
        )


def end_servers_up(run: Run | None, up: subprocess.Popen[bytes]) -> None:
    """The scenario's end, whatever happened: the run killed if it still runs, and
    `gen-tui servers up` interrupted (Ctrl-C: the servers it watched run on)."""
    if run is not None and run.alive():
        run.signal(signal.SIGKILL)
    up.send_signal(signal.SIGINT)
    up.wait(timeout=30)
