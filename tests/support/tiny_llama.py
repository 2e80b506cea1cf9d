"""Write a tiny random-weight Llama beside a tokenizer, for the tests' real servers (SGLang,
`transformers serve`).

Run by GEN_TUI_SGLANG_PYTHON or GEN_TUI_SERVE_PYTHON (it needs torch and transformers, which
gen-tui does not):
`python tiny_llama.py FOLDER`, where FOLDER holds a tokenizer already (the same
`build_tokenizer` the other tests use, tests/support/real_sglang.py writes it);
`python tiny_llama.py FOLDER COUNT` prints transformers' greedy answers for the prompts on
stdin, to hold SGLang's against. The model's
vocabulary is the tokenizer's own size: an input id at or past the model's vocabulary kills
SGLang's server, and an output id past the tokenizer's would decode to nothing. Seeded, so the
same weights every time; nothing is downloaded.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM


def write_model(folder: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=4096,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
        torch_dtype="float32",
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    model.save_pretrained(str(folder))
    print(json.dumps({"vocab_size": config.vocab_size}))


def greedy(folder: Path, prompts: list[list[int]], count: int) -> list[list[int]]:
    """transformers' own greedy continuation of each prompt, `count` tokens past any end
    token: what SGLang must produce for the same weights at temperature 0."""
    model = LlamaForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
    model.generation_config.eos_token_id = None
    answers = []
    with torch.no_grad():
        for prompt in prompts:
            ids = torch.tensor([prompt])
            out = model.generate(ids, do_sample=False, max_new_tokens=count, min_new_tokens=count)
            answers.append(out[0, len(prompt) :].tolist())
    return answers


if __name__ == "__main__":
    if len(sys.argv) == 2:
        write_model(Path(sys.argv[1]))
    else:  # FOLDER COUNT: prompts as a JSON list of id lists on stdin, answers on stdout
        answers = greedy(Path(sys.argv[1]), json.load(sys.stdin), int(sys.argv[2]))
        print(json.dumps(answers))
