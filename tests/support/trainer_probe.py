"""Run the trainers' own data preparation on `gen-tui export`'s files and report what they kept.

Runs under GEN_TUI_TRAINERS_PYTHON (`.ci/run` builds it in `.venv-trainers`), not gen-tui's
Python: it imports SpecForge 0.2.0 and vLLM speculators 0.9.0, never gen_tui. It judges
nothing; tests/integration/test_trainer_readers.py compares what it reports with the export.

    python trainer_probe.py EXPORTS TOKENIZER TEMPLATE_JSON MAX_LENGTH REPORT

EXPORTS holds `specforge.jsonl`, `sharegpt.jsonl` and `text.jsonl`. TEMPLATE_JSON is the
tokenizer's chat template in SpecForge's terms (`ChatTemplate` fields), registered the way
SpecForge's docs say to register a custom one. REPORT receives
`{"READER/FORMAT": [[input_ids, loss_mask], ...]}`, one entry per row the reader kept;
`specforge-last/FORMAT` is SpecForge with `train_only_last_turn` (the last assistant turn
alone in the mask).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

Rows = list[list[list[int]]]


def specforge_rows(
    path: Path, tokenizer: Any, max_length: int, preformatted: bool, only_last: bool = False
) -> Rows:
    """SpecForge's prompt ingestion (`data.prompts_path`): pre-tokenized rows take its
    stdlib fast path; sharegpt and text rows go through `build_eagle3_dataset`, every
    assistant turn in the mask (its default) or, `only_last`, the last one only (its
    `data.train_only_last_turn`)."""
    from specforge.data.prompt_builder import prepare_prompt_tasks

    tasks = prepare_prompt_tasks(
        path,
        tokenizer,
        chat_template="gen-tui-test",
        max_length=max_length,
        is_preformatted=preformatted,
        train_only_last_turn=only_last,
        cache_dir=None,
        cache_key=None,
        num_proc=None,
    )
    return [[task["payload"]["input_ids"], task["payload"]["loss_mask"]] for task in tasks]


def speculators_rows(path: Path, tokenizer_dir: str, max_length: int, work: Path) -> Rows:
    """`python -m speculators prepare-data`, the real command, then the dataset it saved."""
    from datasets import load_from_disk

    done = subprocess.run(
        [sys.executable, "-m", "speculators", "prepare-data", "--model", tokenizer_dir,
         "--data", str(path), "--output", str(work), "--seq-length", str(max_length),
         "--num-preprocessing-workers", "1"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"speculators prepare-data failed:\n{done.stderr[-3000:]}")
    dataset = load_from_disk(str(work))
    return [[row["input_ids"], row["loss_mask"]] for row in dataset.with_format(None)]


def main(exports: str, tokenizer_dir: str, template: str, max_length: str, report: str) -> None:
    from specforge.data.template import TEMPLATE_REGISTRY, ChatTemplate
    from transformers import AutoTokenizer

    TEMPLATE_REGISTRY.register("gen-tui-test", ChatTemplate(**json.loads(template)))
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    folder, length = Path(exports), int(max_length)
    kept = {
        f"specforge/{name}": specforge_rows(
            folder / f"{name}.jsonl", tokenizer, length, name == "text"
        )
        for name in ("specforge", "sharegpt", "text")
    }
    for name in ("sharegpt", "text"):
        kept[f"specforge-last/{name}"] = specforge_rows(
            folder / f"{name}.jsonl", tokenizer, length, name == "text", only_last=True
        )
    kept["speculators/specforge"] = speculators_rows(
        folder / "specforge.jsonl", tokenizer_dir, length, folder / "speculators-prepared"
    )
    Path(report).write_text(json.dumps(kept))


if __name__ == "__main__":
    main(*sys.argv[1:])
