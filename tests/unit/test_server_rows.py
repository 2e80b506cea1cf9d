"""The servers view's words for a supervised server's state (backends/servers/view.py),
and the strip's line with a supervised state (app/dashboard/summary.py)."""

from __future__ import annotations

import time

from gen_tui.app.dashboard.summary import with_supervised
from gen_tui.backends.config.server_recipe import ServerRecipe
from gen_tui.backends.servers.events import ServerState
from gen_tui.backends.servers.view import (
    Holder,
    ServerRow,
    gpus_of,
    ref_text,
    state_words,
    uptime,
)
from gen_tui.widgets.server_strip import ServerLine

NOW = 1_000_000.0


def row(state: ServerState, detail: str = "", **fields: object) -> ServerRow:
    values: dict[str, object] = {
        "name": "gpu0",
        "url": "http://127.0.0.1:30000",
        "host": "local",
        "state": state,
        "since": NOW - 42,
        "detail": detail,
        "ref": "4242",
        "started_at": NOW - 65,
        "restarts": 3,
        "last_line": "",
        "argv": ("sim",),
        "port": 30000,
    }
    values.update(fields)
    return ServerRow(**values)  # type: ignore[arg-type]


def test_each_state_in_words() -> None:
    assert state_words(row(ServerState.LOADING), NOW) == "loading for 42 s"
    assert state_words(row(ServerState.HEALTHY), NOW) == "healthy"
    since = time.strftime("%H:%M", time.localtime(NOW - 42))
    assert state_words(row(ServerState.UNHEALTHY), NOW) == f"unhealthy since {since}"
    killed = "pid 4242 was killed by SIGKILL; its log's last line: -"
    assert state_words(row(ServerState.EXITED, killed), NOW) == "exited: SIGKILL"
    code = "pid 4242 exited with code 3; its log's last line: boom"
    assert state_words(row(ServerState.EXITED, code), NOW) == "exited: code 3"
    waiting = row(ServerState.RESTARTING, "in 45 s (restart 1 of at most 5 an hour)")
    assert state_words(waiting, NOW) == "restarting in 3 s"
    told = row(ServerState.RESTARTING, "in 45 s (restart 1 of at most 5 an hour)", last_exit=killed)
    assert state_words(told, NOW) == "restarting in 3 s (exited: SIGKILL)"
    assert state_words(row(ServerState.DOWN), NOW) == "down after 3 restarts"
    assert state_words(row(ServerState.NOT_OURS), NOW) == "not ours"


def test_pid_and_uptime() -> None:
    assert uptime(row(ServerState.HEALTHY), NOW) == "1m05s"
    assert uptime(row(ServerState.STOPPED, ref=None), NOW) == "-"
    assert ref_text(row(ServerState.HEALTHY)) == "4242"
    foreign = row(ServerState.NOT_OURS, ref=None, holder=Holder(77, "bob", "sglang"))
    assert ref_text(foreign) == "pid 77"
    assert ref_text(row(ServerState.NOT_OURS, ref=None)) == "pid ?"


def test_the_strip_says_the_supervised_state() -> None:
    read = ServerLine("http://127.0.0.1:30000", "ok", None)
    lines = with_supervised((read,), {"http://127.0.0.1:30000/": "gpu0: healthy",
                                      "http://127.0.0.1:30001": "gpu1: loading"})  # fmt: skip
    assert lines[0].text(detail=False).startswith("127.0.0.1:30000 gpu0: healthy · ")
    assert lines[1].text(detail=False) == "127.0.0.1:30001 gpu1: loading"
    assert with_supervised((read,), {}) == (read,)


def test_the_gpus_a_recipe_gives() -> None:
    def recipe(*argv: str, **fields: object) -> ServerRecipe:
        return ServerRecipe("gpu0", ("python", "-m", "sglang.launch_server", *argv), 1, **fields)  # type: ignore[arg-type]

    devices = recipe("--tp", "2", env=(("CUDA_VISIBLE_DEVICES", "4,5"),))
    assert gpus_of(devices) == "4,5"  # the device list wins: it names them
    assert gpus_of(recipe(env=(("CUDA_VISIBLE_DEVICES", ""),))) == "none"
    assert gpus_of(recipe("--tp", "8", launcher="slurm", slurm=(("gpus", 4),))) == "4 (gres)"
    assert gpus_of(recipe("--tp", "8")) == "8"
    assert gpus_of(recipe("--tp-size=2")) == "2"
    assert gpus_of(recipe("--tensor-parallel-size", "4")) == "4"
    assert gpus_of(recipe("--tp")) == "-" and gpus_of(recipe("--tp", "x")) == "-"
    assert gpus_of(recipe()) == "-"
    hostile = recipe(env=(("CUDA_VISIBLE_DEVICES", "\x1b[2J0\n1" + "9" * 100),))
    assert "\x1b" not in gpus_of(hostile) and "\n" not in gpus_of(hostile)
