"""The trainers themselves read `gen-tui export`'s files: SpecForge 0.2.0's prompt ingestion
(`prepare_prompt_tasks`) on each format and vLLM speculators 0.9.0's `prepare-data` on the
`specforge` one, over the export of a real `gen-tui run` against the simulator.

Both need torch, which gen-tui does not, so they run from their own environment
(tests/support/trainer_probe.py under GEN_TUI_TRAINERS_PYTHON; `.ci/run` builds it in
`.venv-trainers`). Without it the tests are skipped, saying why.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bench.common import simulator
from gen_tui.backends.tokenizer import load_tokenizer
from tests.support.run_output import ENV, gen_tui
from tests.support.side_python import side_python_problem
from tests.support.turns import TURN_MEAN, run_args, write_conversations

TRAINERS_PYTHON = os.environ.get("GEN_TUI_TRAINERS_PYTHON", "")
PROBE = Path(__file__).parents[1] / "support" / "trainer_probe.py"
MAX_LENGTH = 4096
"""Above every exported row (prompt up to ~80 tokens, answer at most 300): nothing is cut."""
DEMO_TEMPLATE = {
    "user_header": "<|user|>\n",
    "assistant_header": "<|assistant|>\n",
    "end_of_turn_token": "<|end|>\n",
}
"""backends/demo.py's CHAT_TEMPLATE in SpecForge's terms, which it needs to find the answer."""
FORMATS = ("specforge", "sharegpt", "text")
TURN_CONVERSATIONS = 20
# torch and datasets imports, SpecForge's map over 100 rows and a prepare-data process take
# tens of seconds on the two shared cores.
pytestmark = pytest.mark.timeout(300)


@functools.cache
def trainers_problem() -> str | None:
    """Why GEN_TUI_TRAINERS_PYTHON cannot run the trainers' readers (None: it can)."""
    return side_python_problem(
        "GEN_TUI_TRAINERS_PYTHON",
        TRAINERS_PYTHON,
        ("specforge", "speculators", "datasets", "transformers", "torch"),
        "it names a python with specforge 0.2.0 and speculators 0.9.0 "
        "(.ci/run builds one in .venv-trainers)",
        ENV,
    )


Row = tuple[tuple[int, ...], tuple[int, ...]]


def read_exports(
    run_dir: Path, tokenizer_dir: Path, folder: Path
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[Row]]]:
    """Export `run_dir` in every format into `folder`, run the trainers' readers on it:
    (the export's rows per format, what each reader kept per `READER/FORMAT`)."""
    exported = {}
    for name in FORMATS:
        target = folder / f"{name}.jsonl"
        done = gen_tui("export", "--output-dir", str(run_dir), "--format", name,
                       "--to", str(target))  # fmt: skip
        assert done.returncode == 0, done.stderr.decode()
        exported[name] = [json.loads(line) for line in target.read_text().splitlines()]
    report = folder / "kept.json"
    probe = subprocess.run(
        [TRAINERS_PYTHON, str(PROBE), str(folder), str(tokenizer_dir), json.dumps(DEMO_TEMPLATE),
         str(MAX_LENGTH), str(report)],
        capture_output=True, text=True, timeout=280, env=ENV, check=False,
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr[-3000:]
    kept = {
        reader: [(tuple(ids), tuple(mask)) for ids, mask in rows]
        for reader, rows in json.loads(report.read_text()).items()
    }
    return exported, kept


@pytest.fixture(scope="module")
def read_back(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[Row]]]:
    """(the export's rows per format, what each reader kept per `READER/FORMAT`)."""
    if problem := trainers_problem():
        pytest.skip(problem)
    # Asked for only now: a skipped test should not first spend seconds on a run.
    finished_run = request.getfixturevalue("finished_run")
    tokenizer_dir = request.getfixturevalue("tokenizer_dir")
    return read_exports(finished_run[0], tokenizer_dir, tmp_path_factory.mktemp("exports"))


@pytest.fixture(scope="module")
def read_back_turns(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[Row]]]:
    """`read_back` of a `--turns all` run: 3-to-8-turn conversations against the simulator."""
    if problem := trainers_problem():
        pytest.skip(problem)
    tokenizer_dir = request.getfixturevalue("tokenizer_dir")
    vocab_size = request.getfixturevalue("vocab_size")
    work = tmp_path_factory.mktemp("turns")
    write_conversations(work / "prompts" / "chat.jsonl", TURN_CONVERSATIONS)
    with simulator(
        "--tokens-per-s", "4000", "--vocab-size", str(vocab_size),
        "--profile", f"chat={TURN_MEAN}:0.6",
    ) as url:  # fmt: skip
        done = gen_tui(*run_args(work / "prompts", work / "out", url, tokenizer_dir, 10**9))
    assert done.returncode == 0, done.stderr.decode()
    folder = work / "exports"
    folder.mkdir()
    return read_exports(work / "out", tokenizer_dir, folder)


def pair(row: dict[str, Any]) -> Row:
    return tuple(row["input_ids"]), tuple(row["loss_mask"])


def test_both_trainers_keep_every_specforge_row_with_its_ids_and_mask(
    read_back: tuple[dict[str, list[dict[str, Any]]], dict[str, list[Row]]],
) -> None:
    exported, kept = read_back
    rows = [pair(row) for row in exported["specforge"]]
    assert len(rows) == 100
    assert kept["specforge/specforge"] == rows  # the fast path keeps the file's order
    assert Counter(kept["speculators/specforge"]) == Counter(rows)  # prepare-data shuffles


def test_specforge_renders_sharegpt_and_text_rows_to_the_exported_prompt_and_answer(
    read_back: tuple[dict[str, list[dict[str, Any]]], dict[str, list[Row]]],
    tokenizer_dir: Path,
) -> None:
    """SpecForge tokenizes the conversation itself and masks the assistant turn by the
    template's markers: it must get the exported text's tokens, its loss starting exactly
    where the `specforge` row's prompt ends (the answer and its end-of-turn marker)."""
    exported, kept = read_back
    tokenizer = load_tokenizer(str(tokenizer_dir))
    prompt_length = {row["id"]: row["loss_mask"].index(1) for row in exported["specforge"]}
    expected = Counter[Row]()
    for row in exported["text"]:
        ids = tokenizer(row["text"], add_special_tokens=False)["input_ids"]
        split = prompt_length[row["id"]]
        expected[(tuple(ids), (0,) * split + (1,) * (len(ids) - split))] += 1
    assert sum(expected.values()) == 100
    assert [row["id"] for row in exported["sharegpt"]] == [row["id"] for row in exported["text"]]
    for name in ("sharegpt", "text"):  # build_eagle3_dataset shuffles
        assert Counter(kept[f"specforge/{name}"]) == expected, name


def test_both_trainers_keep_every_turns_all_row_with_every_turn_in_the_mask(
    read_back_turns: tuple[dict[str, list[dict[str, Any]]], dict[str, list[Row]]],
) -> None:
    """`--turns all`: one row a conversation, as many runs of mask 1 as assistant turns,
    and both readers keep each row's ids and mask as exported."""
    exported, kept = read_back_turns
    rows = [pair(row) for row in exported["specforge"]]
    assert len(rows) == TURN_CONVERSATIONS
    for row in exported["specforge"]:
        mask = row["loss_mask"]
        runs = sum(1 for i, bit in enumerate(mask) if bit and (i == 0 or not mask[i - 1]))
        assert runs == row["metadata"]["turns"] >= 3
    assert kept["specforge/specforge"] == rows
    assert Counter(kept["speculators/specforge"]) == Counter(rows)


def test_specforge_masks_a_turns_all_conversation_it_renders_exactly_as_exported(
    read_back_turns: tuple[dict[str, list[dict[str, Any]]], dict[str, list[Row]]],
) -> None:
    """SpecForge renders a `sharegpt`/`text` conversation itself and masks each assistant
    turn by the template's markers, from after the assistant header through the template's
    end-of-turn token (`<|end|>\\n` here, Qwen's `<|im_end|>\\n`): it must get the
    `specforge` row's ids and mask token for token, turn boundaries included (the row once
    left each turn's end-of-turn markup out: 2 tokens a turn fewer than SpecForge's mask,
    and the last turn's markup out of the ids)."""
    exported, kept = read_back_turns
    rows = Counter(pair(row) for row in exported["specforge"])
    for name in ("sharegpt", "text"):
        theirs = kept[f"specforge/{name}"]
        assert len(theirs) == TURN_CONVERSATIONS, name
        for ids, mask in theirs:  # the first disagreement, named, before the whole
            ours = next((row for row in rows if row[0] == ids), None)
            assert ours is not None, f"{name}: SpecForge's ids are no exported row's"
            diff = [at for at, (a, b) in enumerate(zip(ours[1], mask, strict=True)) if a != b]
            assert not diff, f"{name}: masks differ at {diff[:5]} of {len(ids)}"
        assert Counter(theirs) == rows, name
