"""The embedded default: a tokenizer and sample datasets built offline, for the demo and tests.

Nothing is downloaded: the tokenizer is a small byte-level BPE trained here on generated
text and saved in the transformers layout, so the real `AutoTokenizer` and
`apply_chat_template` path runs exactly as it does with a model's own tokenizer.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

if TYPE_CHECKING:
    from gen_tui.backends.sim import SimConfig

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
SPECIAL_TOKENS = ["<|pad|>", "<|bos|>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>"]

_WORDS = (
    "write a function that returns the sum of two numbers explain how binary search works "
    "refactor this python class to use dataclasses parse a json file and count the keys what "
    "is the difference between a list and a tuple implement quicksort in rust call the "
    "weather api for the given city and format the result as a table generate unit tests for "
    "the following module describe the time complexity convert this sql query to pandas "
    "summarize the document in three sentences "
).split()


@dataclass(frozen=True)
class DemoDataset:
    """One dataset of both demos (the control panel's and `gen-tui run --demo`): the seed's
    answer length for it, the prompt layout its file is written in, and its token budget."""

    name: str
    mean_tokens: float
    layout: str
    budget: int

    @property
    def prompts(self) -> int:
        """Prompts enough for PROMPT_HEADROOM times the budget, so a resume to a higher
        budget still has work."""
        return math.ceil(PROMPT_HEADROOM * self.budget / self.mean_tokens)


PROMPT_HEADROOM = 2.5
STAR = "B2_opencodeinstruct"
"""The dataset the control panel's demo makes visibly cross its budget within about a minute."""

DEMO_DATASETS = (
    DemoDataset("B1_glaive", 600.0, "conversations", 800_000),
    DemoDataset(STAR, 3793.0, "messages", 10_000_000),
    DemoDataset("B3_sharegpt", 1500.0, "prompt", 6_000_000),
    DemoDataset("B4_magicoder", 1100.0, "messages", 8_000_000),
    DemoDataset("B5_metamathqa", 700.0, "prompt", 4_000_000),
    DemoDataset("B6_codefeedback", 2400.0, "messages", 12_000_000),
    DemoDataset("B7_openhermes", 1000.0, "conversations", 8_000_000),
    DemoDataset("B8_ultrachat", 1800.0, "messages", 10_000_000),
)
"""The one demo catalogue: names, lengths, layouts and budgets (the panel's demo shows all)."""
HEADLESS_DATASETS = DEMO_DATASETS[:3]
"""`gen-tui run --demo`: the first three, as a table on a terminal fits them."""


def build_tokenizer(directory: Path, vocab_size: int = 2000) -> Path:
    """Train and save a small chat tokenizer in `directory` (idempotent); return the path."""
    if (directory / "tokenizer_config.json").exists():
        return directory
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    rng = random.Random(0)
    corpus = [" ".join(rng.choices(_WORDS, k=40)) for _ in range(2000)]
    corpus += ["abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789 {}[]()<>.,;:!?"]
    # The simulated model's words, so its answers tokenize one token a word as a model's own
    # tokenizer would (added after the prompts' words: the vocabulary has room for all of
    # them, so every prompt word stays one token and prompts keep their token counts).
    from gen_tui.backends.sim.completion import WORDS

    corpus += [" ".join(rng.sample(WORDS, len(WORDS))) for _ in range(200)]
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(corpus, trainer=trainer)
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=core,
        bos_token="<|bos|>",
        eos_token="<|end|>",
        pad_token="<|pad|>",
    )
    wrapped.chat_template = CHAT_TEMPLATE
    directory.mkdir(parents=True, exist_ok=True)
    wrapped.save_pretrained(str(directory))
    return directory


def prompt_line(layout: str, sample_id: int | str | None, text: str) -> bytes:
    """One prompt line in one of the three accepted layouts."""
    record: dict[str, object]
    if layout == "messages":
        record = {"messages": [{"role": "user", "content": text}]}
    elif layout == "conversations":
        record = {
            "conversations": [{"from": "human", "value": text}, {"from": "gpt", "value": "x"}]
        }
    else:
        record = {"prompt": text}
    if sample_id is not None:
        record = {"id": sample_id, **record}
    return orjson.dumps(record) + b"\n"


def write_prompts(path: Path, count: int, layout: str = "messages", seed: int = 0) -> Path:
    """Write `count` generated prompts to `path`, ids `<stem>-<n>`."""
    rng = random.Random(f"{seed}:{path.stem}")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        for index in range(count):
            text = " ".join(rng.choices(_WORDS, k=rng.randint(8, 60)))
            handle.write(prompt_line(layout, f"{path.stem}-{index}", text))
    return path


def write_demo_prompts(
    directory: Path, datasets: tuple[DemoDataset, ...] = HEADLESS_DATASETS
) -> dict[str, Path]:
    """One prompt file per dataset, in its layout, PROMPT_HEADROOM times its budget."""
    return {
        spec.name: write_prompts(directory / f"{spec.name}.jsonl", spec.prompts, spec.layout)
        for spec in datasets
    }


def demo_sim_config(vocab_size: int | None = None) -> SimConfig:
    """A simulated 64-slot server whose per-dataset lengths mimic the seed's datasets, fast
    enough that the headless demo's three budgets (16.8M tokens) are reached in about a
    minute. `vocab_size`: the demo tokenizer's (:func:`vocab_size`), so the answers' ids
    are ids of that tokenizer and `gen-tui verify` finds the demo's output sound."""
    from gen_tui.backends.sim import LengthProfile, SimConfig

    return SimConfig(
        slots=64,
        tokens_per_s=5000.0,
        prefill_s=0.05,
        profiles={spec.name: LengthProfile(mean=spec.mean_tokens) for spec in HEADLESS_DATASETS},
        vocab_size=vocab_size,
    )


def vocab_size(directory: Path) -> int:
    """How many ids the tokenizer saved in `directory` has (read from its tokenizer.json,
    without loading transformers)."""
    data = orjson.loads((directory / "tokenizer.json").read_bytes())
    ids: set[int] = set(data["model"]["vocab"].values())
    ids |= {token["id"] for token in data["added_tokens"]}
    return max(ids) + 1
