"""`gen-tui export` of a real `gen-tui run` over the simulator: every format decodes back to
the run's prompts and answers, the accounting is exact and changed inputs are refused. The
trainers' own readers take the same export in tests/integration/test_trainer_readers.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from gen_tui.backends.store.prompts import Prompt, iter_prompts
from gen_tui.backends.store.records import sample_key
from gen_tui.backends.tokenizer import encode_messages, load_tokenizer
from tests.support.run_output import copy_run, gen_tui


def records_of(out: Path, name: str) -> dict[str, dict[str, Any]]:
    lines = (out / name / "raw_responses.jsonl").read_text().splitlines()
    return {sample_key(r["sample_id"]): r for r in map(json.loads, lines)}


def prompts_of(prompts: Path, name: str) -> dict[str, list[dict[str, str]]]:
    return {
        p.key: p.messages for p in iter_prompts(prompts / f"{name}.jsonl") if isinstance(p, Prompt)
    }


def export(out: Path, *flags: str) -> tuple[int, list[dict[str, Any]], list[str]]:
    """(exit code, rows, stderr lines) of an export to stdout."""
    done = gen_tui("export", "--output-dir", str(out), "--to", "-", *flags)
    rows = [json.loads(line) for line in done.stdout.decode().splitlines()]
    return done.returncode, rows, done.stderr.decode().splitlines()


def accounting(lines: list[str], name: str) -> str:
    return next(line for line in lines if line.startswith(f"{name}: "))


@pytest.fixture(scope="module")
def tokenizer(tokenizer_dir: Path) -> Any:
    return load_tokenizer(str(tokenizer_dir))


@pytest.mark.quick
def test_specforge_rows_decode_back_to_the_prompt_and_the_answer(
    finished_run: tuple[Path, Path], tokenizer: Any
) -> None:
    out, prompts = finished_run
    code, rows, lines = export(out, "--format", "specforge")
    assert code == 0, lines
    records = {name: records_of(out, name) for name in ("A", "B")}
    assert len(rows) == 100 == sum(map(len, records.values()))
    assert accounting(lines, "all") == "all: 100 records = 100 exported + 0 skipped"
    end = tokenizer("<|end|>\n", add_special_tokens=False)["input_ids"]  # the demo template's
    assert len(end) == 2
    for row in rows:
        name, key = row["id"].split("/", 1)
        record = records[name][key]
        messages = prompts_of(prompts, name)[key]
        prompt_ids = encode_messages(tokenizer, messages)
        split = row["loss_mask"].index(1)
        assert row["input_ids"][:split] == prompt_ids
        # The answer, then the template's end-of-turn markup, in the mask as SpecForge masks
        # its own render of the conversation (test_trainer_readers.py asks SpecForge).
        assert row["input_ids"][split:] == record["output_ids"] + end
        assert row["loss_mask"] == [0] * split + [1] * (len(record["output_ids"]) + len(end))
        rendered = tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True
        )
        assert tokenizer.decode(row["input_ids"][:split]) == rendered
        meta = row["metadata"]
        assert (meta["dataset"], meta["sample_id"], meta["prompt_tokens"]) == (name, key, split)
        assert meta["finish_reason"] == record["finish_reason"]
        assert meta["sampling"] == {"max_new_tokens": 300}
    assert {row["metadata"]["finish_reason"] for row in rows} == {"stop", "length"}


def test_sharegpt_and_text_rows_hold_the_prompt_and_the_answer(
    finished_run: tuple[Path, Path], tokenizer: Any
) -> None:
    out, prompts = finished_run
    code, sharegpt, _ = export(out, "--format", "sharegpt", "--datasets", "B")
    assert code == 0
    code, text, _ = export(out, "--format", "text", "--datasets", "B")
    assert code == 0
    records, messages = records_of(out, "B"), prompts_of(prompts, "B")
    assert [row["id"] for row in sharegpt] == [row["id"] for row in text]
    assert [row["id"] for row in sharegpt] == [f"B/{key}" for key in messages]  # file order
    for chat, flat in zip(sharegpt, text, strict=True):
        key = chat["id"].split("/", 1)[1]
        answer = {"role": "assistant", "content": records[key]["text"]}
        assert chat["conversations"] == [*messages[key], answer]
        assert flat["text"] == tokenizer.apply_chat_template(
            [*messages[key], answer], tokenize=False
        )


def test_every_skip_is_counted_with_its_reason(
    finished_run: tuple[Path, Path], tmp_path: Path
) -> None:
    out = copy_run(finished_run, tmp_path)
    raw = out / "A" / "raw_responses.jsonl"
    records = [json.loads(line) for line in raw.read_text().splitlines()]
    stops = [i for i, r in enumerate(records) if r["finish_reason"] == "stop"]
    records[stops[0]]["prompt_tokens"] += 1  # ids mismatch
    records[stops[1]]["sample_id"] = "not-in-the-file"  # prompt missing
    records.append(dict(records[stops[2]]))  # duplicate
    raw.write_text("".join(json.dumps(r) + "\n" for r in records))
    truncated = sum(r["finish_reason"] == "length" for r in records)
    code, rows, lines = export(out, "--format", "specforge", "--datasets", "A", "--drop-truncated")
    assert code == 0, lines
    assert accounting(lines, "A") == (
        f"A: 61 records = {61 - 3 - truncated} exported + {3 + truncated} skipped "
        f"(duplicate 1, ids mismatch 1, prompt missing 1, truncated {truncated})"
    )
    assert truncated and all(row["metadata"]["finish_reason"] == "stop" for row in rows)
    code, rows, lines = export(
        out, "--format", "specforge", "--datasets", "A", "--max-length", "150"
    )
    assert all(len(row["input_ids"]) <= 150 for row in rows)
    over = int(accounting(lines, "A").split("over --max-length ")[1].split(",")[0].rstrip(")"))
    assert over > 0 and len(rows) == 61 - 3 - over


@pytest.mark.parametrize("change", ["prompt file", "chat template", "mixed setups"])
def test_export_refuses_in_one_line_when_the_inputs_changed(
    finished_run: tuple[Path, Path], tmp_path: Path, tokenizer_dir: Path, change: str
) -> None:
    out = copy_run(finished_run, tmp_path)
    manifest_path = out / "A" / "run_manifest.json"
    manifest = json.loads(manifest_path.read_text())
    run = manifest["runs"][0]
    if change == "prompt file":
        moved = tmp_path / "A.jsonl"
        moved.write_bytes(Path(run["prompts"]).read_bytes().replace(b"the", b"a", 1))
        run["prompts"] = str(moved)
    elif change == "chat template":
        tok = tmp_path / "tok"
        shutil.copytree(tokenizer_dir, tok)
        for name in ("chat_template.jinja", "tokenizer_config.json"):
            if (tok / name).exists():
                text = (tok / name).read_text().replace("<|end|>", "<|end|> ", 1)
                (tok / name).write_text(text)
        run["tokenizer"] = str(tok)
    else:
        manifest["runs"].append({**run, "sampling": {"max_new_tokens": 10}, "first_record": 5})
    manifest_path.write_text(json.dumps(manifest))
    target = tmp_path / "rows.jsonl"
    done = gen_tui("export", "--output-dir", str(out), "--format", "sharegpt", "--to", str(target))
    err = done.stderr.decode().strip().splitlines()
    assert done.returncode == 1 and len(err) == 1, err
    expected = {"prompt file": "changed since the run", "chat template": "chat template",
                "mixed setups": "different sampling"}[change]  # fmt: skip
    assert err[0].startswith("gen-tui: error: ") and expected in err[0]
    assert not target.exists() and not list(tmp_path.glob(".rows.jsonl.*"))


def test_a_resume_with_another_setup_is_noted_and_the_same_one_is_not(
    finished_run: tuple[Path, Path], tmp_path: Path, tokenizer_dir: Path
) -> None:
    from gen_tui.backends.store.manifest import RunSetup, read_manifest, record_setup

    out = copy_run(finished_run, tmp_path)
    manifest = read_manifest(out / "A")
    (setup,) = manifest.setups
    record_setup(out / "A", "A", setup, 60)
    assert len(read_manifest(out / "A").runs) == 1
    moved = RunSetup(**{**setup.__dict__, "servers": ["http://10.0.0.7:30000"]})
    record_setup(out / "A", "A", moved, 60)  # another URL for the same model: one setup
    assert read_manifest(out / "A").single_setup().servers == [*setup.servers, *moved.servers]
    changed = RunSetup(**{**setup.__dict__, "sampling": {"max_new_tokens": 9}})
    record_setup(out / "A", "A", changed, 60)
    assert [run["first_record"] for run in read_manifest(out / "A").runs] == [0, 60]
    record_setup(out / "B", "B", changed, 0)  # no record yet: the new setup replaces the old
    assert read_manifest(out / "B").setups == [changed]


def test_export_writes_its_default_file_and_usage_errors_exit_2(
    finished_run: tuple[Path, Path], tmp_path: Path
) -> None:
    out = copy_run(finished_run, tmp_path)
    done = gen_tui("export", "--output-dir", str(out), "--format", "text")
    assert done.returncode == 0
    assert len((out / "export.text.jsonl").read_text().splitlines()) == 100
    bad = gen_tui("export", "--output-dir", str(out), "--format", "alpaca")
    assert bad.returncode == 2 and bad.stderr.decode().count("\n") == 1
    missing = gen_tui("export", "--output-dir", str(out), "--format", "text", "--datasets", "Z")
    assert missing.returncode == 1 and "no dataset folder 'Z'" in missing.stderr.decode()
