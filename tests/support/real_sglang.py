"""A real SGLang 0.5.23 server on this CPU, serving a tiny random-weight Llama made offline.

gen-tui's SGLang client, its /metrics reader and the router's view are tested against the
simulator everywhere; this is the real server they are written for, started once per test
session (tests/conftest.py's `real_sglang`). It runs from GEN_TUI_SGLANG_PYTHON (`.ci/run`
builds `.venv-sglang`: sglang --no-deps on CPU torch plus what its server imports) with
SGLang's CPU engine and torch_native attention; tests/support/sglang_cpu goes on its
PYTHONPATH (a plain-torch `sgl_kernel` for the two functions that engine imports, whose CPU
build is not on PyPI, and the torchvision shim). Without that python the tests that need it
are skipped, saying why; a server that does not come up fails them with its log's tail.

The model: `build_tokenizer` (the same tokenizer as the `tokenizer_dir` fixture) and a
2-layer Llama of hidden size 64 whose vocabulary is that tokenizer's size
(tests/support/tiny_llama.py), written once beside the python's environment and reused while
its stamp matches.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from gen_tui.backends.demo import build_tokenizer
from tests.support.ports import free_port

SGLANG_PYTHON = os.environ.get("GEN_TUI_SGLANG_PYTHON", "")
SGLANG_VERSION = "0.5.23"
SUPPORT = Path(__file__).parent
SHIMS = SUPPORT / "sglang_cpu"
TINY_LLAMA = SUPPORT / "tiny_llama.py"
START_S = 300.0
"""How long the server may take to answer /health: about a minute cold on 2 shared cores."""
STAMP = "tiny-llama v1: build_tokenizer(), 2 layers, hidden 64, seed 0"
"""What the cached model is; a different stamp (or none) makes it again."""
SERVER_MODULES = ("sglang", "uvicorn", "fastapi", "uvloop", "xgrammar", "openai_harmony")
"""Modules only the server path imports: an environment built for the metrics code alone
(an older `.ci/run`) lacks them."""


def server_env() -> dict[str, str]:
    """The server's environment: the CPU engine, the shims first on its path, offline."""
    path = os.pathsep.join(filter(None, [str(SHIMS), os.environ.get("PYTHONPATH", "")]))
    return {
        **os.environ,
        "SGLANG_USE_CPU_ENGINE": "1",
        "PYTHONPATH": path,
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "NO_COLOR": "1",
    }


def real_sglang_problem() -> str | None:
    """Why GEN_TUI_SGLANG_PYTHON cannot serve (None: it can, as far as installs go)."""
    if not SGLANG_PYTHON:
        return (
            f"GEN_TUI_SGLANG_PYTHON is not set: it names a python with sglang {SGLANG_VERSION}'s "
            "server and CPU torch, which .ci/run builds in .venv-sglang"
        )
    check = (
        "import importlib.util, sys; from importlib.metadata import version; "
        f"missing = [m for m in {SERVER_MODULES!r} if importlib.util.find_spec(m) is None]; "
        "print(version('sglang') if not missing else 'missing ' + ', '.join(missing))"
    )
    try:
        done = subprocess.run(
            [SGLANG_PYTHON, "-c", check], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"GEN_TUI_SGLANG_PYTHON={SGLANG_PYTHON} cannot run: {exc}"
    found = done.stdout.strip() or (done.stderr.strip().splitlines() or ["nothing"])[-1]
    if found != SGLANG_VERSION:
        return (
            f"GEN_TUI_SGLANG_PYTHON={SGLANG_PYTHON} cannot serve sglang {SGLANG_VERSION}: {found} "
            "(.ci/run installs the server's imports)"
        )
    return None


def tiny_model(cache: Path) -> Path:
    """The tiny Llama's folder in `cache`, made there first when its stamp is not STAMP.
    Made in a sibling folder and renamed into place, so an interrupted build is never used."""
    folder = cache / "tiny-llama"
    stamp = folder / "gen-tui-stamp"
    if stamp.is_file() and stamp.read_text() == STAMP:
        return folder
    building = cache / f"tiny-llama.building-{os.getpid()}"
    shutil.rmtree(building, ignore_errors=True)
    build_tokenizer(building)
    made = subprocess.run(
        [SGLANG_PYTHON, str(TINY_LLAMA), str(building)],
        capture_output=True, text=True, timeout=300, env=server_env(), check=False,
    )  # fmt: skip
    if made.returncode != 0:
        raise RuntimeError(f"{TINY_LLAMA.name} failed:\n{made.stderr[-3000:]}")
    (building / "gen-tui-stamp").write_text(STAMP)
    shutil.rmtree(folder, ignore_errors=True)
    try:
        building.rename(folder)
    except OSError:  # another session put its own in place first: the same model
        shutil.rmtree(building, ignore_errors=True)
        if not (stamp.is_file() and stamp.read_text() == STAMP):
            raise
    return folder


def model_cache() -> Path:
    """Where the model is kept: in GEN_TUI_SGLANG_PYTHON's environment (`.venv-sglang`), so
    it is made once per environment and goes when the environment does. The environment is
    the python's folder's parent as named (resolving the link would leave the venv)."""
    return Path(os.path.abspath(SGLANG_PYTHON)).parents[1]


@dataclass(frozen=True)
class RealSGLang:
    """A running server: its URL, the model folder it serves (a tokenizer too) and its log."""

    url: str
    model: Path
    log: Path
    cold_start_s: float
    pid: int


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def log_tail(log: Path, size: int = 3000) -> str:
    return log.read_text(errors="replace")[-size:] if log.exists() else "(no log)"


def server_argv(model: Path, port: int) -> list[str]:
    """`sglang.launch_server` of `model` on this CPU at 127.0.0.1:`port`, with /metrics: the
    session's server (`start_real_sglang`) and the servers story's recipes alike."""
    return [
        *(SGLANG_PYTHON, "-m", "sglang.launch_server", "--model-path", str(model)),
        *("--host", "127.0.0.1", "--port", str(port), "--device", "cpu"),
        *("--attention-backend", "torch_native", "--mem-fraction-static", "0.1"),
        *("--max-total-tokens", "65536", "--skip-server-warmup", "--sleep-on-idle"),
        "--enable-metrics",
    ]


@contextlib.contextmanager
def start_real_sglang(model: Path, log: Path) -> Iterator[RealSGLang]:
    """`sglang.launch_server` on a free loopback port, once /health answers; stopped (its
    whole process group: the scheduler and detokenizer are its children) afterwards."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = server_argv(model, port)
    began = time.monotonic()
    with open(log, "wb") as out:
        process = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=server_env(), start_new_session=True,
        )  # fmt: skip
    try:
        while not _answers(url):
            if process.poll() is not None:
                raise RuntimeError(
                    f"the SGLang server exited ({process.returncode}):\n{log_tail(log)}"
                )
            if time.monotonic() - began > START_S:
                raise RuntimeError(f"the SGLang server gave no /health in {START_S:.0f} s:\n"
                                   f"{log_tail(log)}")  # fmt: skip
            time.sleep(0.5)
        yield RealSGLang(url, model, log, time.monotonic() - began, process.pid)
    finally:
        _stop(process)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server's process group, SIGKILL to what is left after 30 s."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=30)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
