"""A dataset's manifest names a tokenizer folder someone else made (issue 30, point 1).

The attack: in a shared output folder, `run_manifest.json` names a tokenizer folder whose
`tokenizer_config.json` has an `auto_map` to its own `evil.py`, and whose name carries OSC 0,
OSC 52 and a clear-screen. transformers, unasked, prompts "Do you wish to run the custom
code? [y/N]" with that name raw on stdout, and a `y` runs the code as us. Real `gen-tui`
processes, stdin answering `y`: the code never runs, and no escape reaches the terminal.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gen_tui.backends.demo import build_tokenizer, write_prompts
from gen_tui.backends.watcher import MANIFEST_FILE

GEN_TUI = str(Path(sys.executable).with_name("gen-tui"))
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
HOSTILE = "ev\x1b]0;T\x07\x1b]52;c;aGk=\x07\x1b[2Jtok"
"""A folder name that sets the window title, writes the clipboard and clears the screen."""


def evil_tokenizer(root: Path, marker: Path) -> Path:
    """A working tokenizer folder whose config asks transformers to import its `evil.py`,
    which writes `marker` on import."""
    folder = build_tokenizer(root / HOSTILE)
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config.pop("tokenizer_class", None)  # with no class of its own, transformers asks
    config["auto_map"] = {"AutoTokenizer": [None, "evil.EvilTokenizer"]}
    config_path.write_text(json.dumps(config))
    (folder / "evil.py").write_text(
        "import pathlib\n"
        f"pathlib.Path({str(marker)!r}).write_text('ran')\n"
        "from transformers import PreTrainedTokenizerFast\n"
        "class EvilTokenizer(PreTrainedTokenizerFast):\n    pass\n"
    )
    return folder


def dataset_naming(out: Path, tokenizer: Path, prompts: Path) -> Path:
    """Dataset D1 of `out`: one record, a manifest naming `tokenizer` and `prompts`."""
    folder = out / "D1"
    folder.mkdir(parents=True)
    (folder / "raw_responses.jsonl").write_text(
        '{"sample_id":"D1-0","completion_tokens":1,"prompt_tokens":3,'
        '"finish_reason":"stop","output_ids":[5]}\n'
    )
    setup = {
        "prompts": str(prompts),
        "prompts_sha256": hashlib.sha256(prompts.read_bytes()).hexdigest(),
        "tokenizer": str(tokenizer),
        "chat_template_sha256": None,
        "sampling": {},
        "api": "sglang",
        "model": None,
        "servers": [],
    }
    manifest = {"version": 1, "dataset": "D1", "runs": [setup]}
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest))
    return folder


@pytest.mark.parametrize("command", ["verify", "export"])
def test_a_tokenizer_with_its_own_code_is_refused_without_asking(
    tmp_path: Path, command: str
) -> None:
    marker = tmp_path / "MARKER-evil-ran"
    tokenizer = evil_tokenizer(tmp_path, marker)
    prompts = tmp_path / "prompts" / "D1.jsonl"
    write_prompts(prompts, 3, "messages")
    out = tmp_path / "out"
    dataset_naming(out, tokenizer, prompts)
    args = [GEN_TUI, command, "--output-dir", str(out)]
    if command == "export":
        args += ["--format", "sharegpt", "--to", str(tmp_path / "rows.jsonl")]
    done = subprocess.run(
        args, input=b"y\ny\n", capture_output=True, env=ENV, timeout=120, check=False
    )
    both = done.stdout + done.stderr
    assert not marker.exists(), "the tokenizer folder's own code ran"
    assert b"Do you wish to run the custom code" not in both
    assert b"\x1b" not in both and b"\x07" not in both, both
    assert b"Traceback" not in both
    assert done.returncode == 1
    assert b"never runs a tokenizer's code" in done.stderr


def test_alert_and_report_never_print_a_hostile_path_raw(tmp_path: Path) -> None:
    folder = tmp_path / HOSTILE
    folder.mkdir()
    config = folder / "gen-tui.toml"
    config.write_text("[alerts]\nurls = []\n")
    config.chmod(0o600)
    alert = subprocess.run(
        [GEN_TUI, "alert", "--test", "--config", str(config)],
        capture_output=True, env=ENV, timeout=60, check=False,
    )  # fmt: skip
    assert alert.returncode != 0
    assert b"has no [alerts] urls" in alert.stderr
    assert b"\x1b" not in alert.stdout + alert.stderr, alert.stderr
    report = subprocess.run(
        [GEN_TUI, "report", "--output-dir", str(folder)],
        capture_output=True, env=ENV, timeout=60, check=False,
    )  # fmt: skip
    assert report.returncode != 0
    assert b"\x1b" not in report.stdout + report.stderr, report.stderr
    assert b"Traceback" not in report.stderr
