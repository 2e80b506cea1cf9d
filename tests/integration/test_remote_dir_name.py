"""A line break in `--remote-dir` (or a `[[hosts]]` output_dir) is one clear line (issue
30, point 11): before, the panel opened and the folder checks quoted the path, line break
and all, in a two-line refusal about "who could swap the folder". Real `gen-tui` processes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

GEN_TUI = str(Path(sys.executable).with_name("gen-tui"))


def gen_tui(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [GEN_TUI, *args], capture_output=True, text=True, timeout=30, check=False,
        stdin=subprocess.DEVNULL, env={**os.environ, "TERM": "dumb"},
    )  # fmt: skip


@pytest.mark.parametrize("folder", ["/data/out\nput", "/data/out\x1b]0;T\x07put", "/data/\r"])
@pytest.mark.parametrize("host", ["local", "gpu-box"])
def test_a_control_character_in_remote_dir_is_one_line(host: str, folder: str) -> None:
    done = gen_tui("--host", host, "--remote-dir", folder)
    assert done.returncode != 0
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("gen-tui: error: --remote-dir '/data/")
    assert line.endswith("holds a line break or a control character; give the path on one line")
    assert "\x1b" not in done.stderr and "swap" not in done.stderr


def test_a_hosts_entry_with_a_line_break_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "gen-tui.toml"
    config.write_text('[[hosts]]\nname = "box"\ntarget = "local"\noutput_dir = "/data/a\\nb"\n')
    config.chmod(0o600)
    done = gen_tui("--config", str(config))
    assert done.returncode != 0
    (line,) = done.stderr.splitlines()
    assert line == (
        "gen-tui: error: output folder of host box: '/data/a\\nb' holds a line break or a "
        "control character; give the path on one line"
    )
