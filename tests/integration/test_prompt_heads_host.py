"""`v`'s prompt heads for a run on another machine: the watcher looks the samples up in the
prompt file the dataset's manifest names, on the box that holds it (here and over SSH with
Python 3.8), and only the heads cross the link, cleaned on arrival."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import orjson

from gen_tui.backends import watcher
from gen_tui.backends.store.prompt_heads import PROMPT_HEAD_CHARS
from tests.support.records import read_records
from tests.support.runs import AnyHost


def point_manifest_at(folder: Path, prompts: Path) -> None:
    """A manifest whose last run read `prompts` (an earlier run read another file)."""
    runs = [{"prompts": "/nonexistent/old.jsonl"}, {"prompts": str(prompts)}]
    (folder / watcher.MANIFEST_FILE).write_text(json.dumps({"version": 1, "runs": runs}))


async def test_heads_of_a_finished_runs_answers_come_from_its_prompt_file_on_the_host(
    host: AnyHost, finished_run: tuple[Path, Path]
) -> None:
    out = Path(host.output_dir)
    for name in ("A", "B"):  # A's prompts are in `messages`, B's in `conversations`
        shutil.copytree(finished_run[0] / name, out / name)
        keys = [str(record["sample_id"]) for record in read_records(out / name)[-12:]]
        found = await host.prompt_heads(name, [*keys, "no-such-sample"])
        assert set(found.heads) == set(keys), name
        assert (
            found.missing == f"not in {finished_run[1] / f'{name}.jsonl'} (changed since the run?)"
        )
        lines = (finished_run[1] / f"{name}.jsonl").read_bytes().splitlines()
        prompt = next(p for p in map(orjson.loads, lines) if str(p["id"]) == keys[-1])
        turns = prompt.get("messages") or prompt["conversations"]  # B's end on a "gpt" turn
        asked = [t for t in turns if t.get("role") == "user" or t.get("from") == "human"]
        last = (asked[-1].get("content") or asked[-1].get("value")).strip()
        head = found.heads[keys[-1]]
        assert head.endswith(" more characters)") if len(last) > PROMPT_HEAD_CHARS else head == last
        assert last[:PROMPT_HEAD_CHARS] in head


async def test_prompt_text_stays_data(host: AnyHost, tmp_path: Path) -> None:
    folder = Path(host.output_dir) / "A"
    folder.mkdir()
    prompts = tmp_path / "hostile.jsonl"
    evil = "\x1b]52;c;c2VjcmV0\x07\x1b[2J[red]x[/red] \u202etxt.exe " + "y" * 5000
    turns = [{"role": "system", "content": "s"}, {"role": "user", "content": evil}]
    prompts.write_bytes(orjson.dumps({"id": "s1", "messages": turns}) + b"\n")
    point_manifest_at(folder, prompts)
    found = await host.prompt_heads("A", ["s1"])
    head = found.heads["s1"]
    assert head.startswith("(+1 earlier message) \ufffd]52;c;c2VjcmV0\ufffd\ufffd[2J[red]x[/red]")
    assert not any(c in head for c in "\x1b\x07\u202e"), "no escape reaches the screen"
    assert head.endswith(f"… ({len(evil) - PROMPT_HEAD_CHARS:,} more characters)")
    (Path(host.output_dir) / "B").mkdir()
    unknown = await host.prompt_heads("B", ["s1"])
    assert (
        unknown.missing
        == "no prompt file known for B (no run_manifest.json names one, nor its run)"
    )
