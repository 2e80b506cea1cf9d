"""`gen-tui run --api openai` against a real third-party server: `transformers serve`.

The simulator answers the way its author read the servers; this is the check that a real
one agrees. It serves a tiny random-weight Llama and the tests' tokenizer, both made here
offline. It needs torch, which gen-tui does not, so it runs from its own environment:
`.ci/run` builds one and names its python in GEN_TUI_SERVE_PYTHON. Without it the tests
are skipped, saying why.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from gen_tui.backends.demo import write_prompts
from tests.support.ports import free_port
from tests.support.real_sglang import TINY_LLAMA
from tests.support.records import read_records
from tests.support.side_python import side_python_problem

SERVE_PYTHON = os.environ.get("GEN_TUI_SERVE_PYTHON", "")
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
MAX_NEW_TOKENS = 12
BUDGET = 60
PROMPTS = 8
CONCURRENCY = 2
# Server start (torch import, model load) and model building take seconds each on an idle
# machine; CI shares two cores with the rest of the suite.
pytestmark = pytest.mark.timeout(300)

# The `transformers` console script of that environment, without relying on its bin folder.
SERVE = (
    "import sys; from transformers.cli.transformers import main; "
    "sys.argv[0] = 'transformers'; sys.exit(main())"
)


def _serve_python_problem() -> str | None:
    """Why GEN_TUI_SERVE_PYTHON cannot serve, found without importing torch (seconds)."""
    return side_python_problem(
        "GEN_TUI_SERVE_PYTHON",
        SERVE_PYTHON,
        ("torch", "fastapi", "uvicorn", "openai", "transformers.cli.serve"),
        "it names a python with transformers[serving] and torch "
        "(.ci/run builds one in .venv-serve)",
        ENV,
    )


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


@pytest.fixture(scope="module")
def model_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tests' tokenizer (it has a chat template, which the server applies) and a random
    Llama sized to its vocabulary, in one folder: what a model repository looks like."""
    problem = _serve_python_problem()
    if problem:
        pytest.skip(problem)
    path = tmp_path_factory.mktemp("tiny-llama") / "model"
    # Asked for only now: a skipped test should not first spend seconds training it.
    shutil.copytree(request.getfixturevalue("tokenizer_dir"), path)
    built = subprocess.run(
        [SERVE_PYTHON, str(TINY_LLAMA), str(path)],
        capture_output=True,
        text=True,
        timeout=240,
        env=ENV,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    return path


@pytest.fixture(scope="module")
def serve(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`transformers serve` on a free loopback port, pinned to the model (it preloads it, so
    /health answering means it is ready); stopped by its pid afterwards."""
    url = f"http://127.0.0.1:{free_port()}"
    log_path = tmp_path_factory.mktemp("serve") / "serve.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [
                *(SERVE_PYTHON, "-c", SERVE, "serve", str(model_dir), "--device", "cpu"),
                *("--host", "127.0.0.1", "--port", url.rsplit(":", 1)[1]),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=ENV,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 180
        while not _healthy(url):
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log_path.read_text(errors="replace")[-3000:]
                pytest.fail(f"transformers serve did not come up at {url}:\n{tail}")
            time.sleep(0.25)
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def tokenizer(model_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(model_dir))


def gen_tui_run(
    url: str, model: str, prompts: Path, out: Path, tokenizer: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *(sys.executable, "-m", "gen_tui.app.cli", "run", "--api", "openai"),
            *("--server-url", url, "--model", model, "--tokenizer", str(tokenizer)),
            *("--prompts-dir", str(prompts), "--output-dir", str(out), "--plain"),
            *("--max-new-tokens", str(MAX_NEW_TOKENS), "--token-budget", str(BUDGET)),
            *("--concurrency", str(CONCURRENCY), *extra),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env=ENV,
    )


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_gen_tui_run_against_transformers_serve(
    stream: bool, serve: str, model_dir: Path, tokenizer: Any, tmp_path: Path
) -> None:
    prompts_file = write_prompts(tmp_path / "prompts" / "T.jsonl", PROMPTS)
    prompts = {
        (line := orjson.loads(raw))["id"]: line["messages"]
        for raw in prompts_file.read_bytes().splitlines()
    }
    out = tmp_path / "out"
    args = (serve, str(model_dir), prompts_file.parent, out, model_dir)
    extra = ["--stream", "--temperature", "0"] if stream else []

    done = gen_tui_run(*args, *extra)
    assert done.returncode == 0, done.stderr

    records = read_records(out / "T")
    # Recounted here, from the file and the local tokenizer, not taken from the engine.
    ids = [record["sample_id"] for record in records]
    assert len(ids) == len(set(ids)) and set(ids) <= set(prompts)
    for record in records:
        assert record["finish_reason"] in ("length", "stop"), record
        if record["finish_reason"] == "length":
            assert record["completion_tokens"] == MAX_NEW_TOKENS, record
        else:
            assert 0 < record["completion_tokens"] < MAX_NEW_TOKENS, record
        assert isinstance(record["text"], str) and record["text"], record
        # The server chat-templated the prompt as the local tokenizer does.
        assert record["prompt_tokens"] == len(
            tokenizer.apply_chat_template(
                prompts[record["sample_id"]],
                add_generation_prompt=True,
                tokenize=True,
                return_dict=False,
            )
        )
        assert record["output_ids"] == tokenizer.encode(record["text"], add_special_tokens=False)
        assert record["server"] == serve
    tokens = sum(record["completion_tokens"] for record in records)
    assert BUDGET <= tokens <= BUDGET + CONCURRENCY * MAX_NEW_TOKENS
    assert len(records) < PROMPTS
    progress = orjson.loads((out / "T" / "progress.json").read_bytes())
    assert (progress["state"], progress["tokens"], progress["samples"]) == (
        "done",
        tokens,
        len(records),
    )
    assert progress["errors"] == 0 and not (out / "T" / "errors.jsonl").exists()

    # Started again, the run finds its budget spent and sends nothing.
    before = (out / "T" / "raw_responses.jsonl").read_bytes()
    again = gen_tui_run(*args, *extra)
    assert again.returncode == 0, again.stderr
    assert (out / "T" / "raw_responses.jsonl").read_bytes() == before


def test_a_model_the_server_does_not_serve_is_refused_not_retried(
    serve: str, model_dir: Path, tmp_path: Path
) -> None:
    prompts = write_prompts(tmp_path / "prompts" / "T.jsonl", 3).parent
    out = tmp_path / "out"
    gen_tui_run(serve, "not-this-model", prompts, out, model_dir)
    assert read_records(out / "T") == []
    errors = [orjson.loads(line) for line in (out / "T" / "errors.jsonl").read_bytes().splitlines()]
    assert len(errors) == 3
    for error in errors:
        assert (error["status"], error["attempts"]) == (400, 1), error
        assert "not-this-model" in error["reason"]
