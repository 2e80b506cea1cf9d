"""The real SGLang server on this CPU computes what the model computes, and the `sgl_kernel`
stand-in it runs with (tests/support/sglang_cpu) does what SGLang's own kernels do.

The tiny model's weights are random, so its text says nothing: its greedy answers, token for
token equal to transformers' own for the same weights, say the CPU engine and torch_native
attention serve the model right. The prompts go as one batch of different lengths, so
requests share prefill and decode batches (a request reading another's KV cache would
diverge). SGLang's plain serving path never calls the stand-in's two functions (only
speculative decoding and KV moves do; the CPU engine imports them at module level), so their
semantics are checked on their own, against SGLang's triton kernels' described effect."""

from __future__ import annotations

import json
import subprocess
import urllib.request

import pytest

from tests.support.real_sglang import SGLANG_PYTHON, TINY_LLAMA, RealSGLang, server_env

KERNEL_CHECK = r"""
import torch
from sgl_kernel import assign_req_to_token_pool_cpu, copy_all_layer_kv_cache_cpu

# Three requests in pool rows 2, 0, 3: their new slots are out_cache_loc back to back.
req_to_token = torch.zeros((4, 10), dtype=torch.int32)
start, end = torch.tensor([1, 0, 4]), torch.tensor([3, 3, 5])
slots = torch.tensor([100, 101, 200, 201, 202, 300])
assign_req_to_token_pool_cpu(torch.tensor([2, 0, 3]), req_to_token, start, end, slots, 10)
expected = torch.zeros((4, 10), dtype=torch.int32)
expected[2, 1:3] = torch.tensor([100, 101])
expected[0, 0:3] = torch.tensor([200, 201, 202])
expected[3, 4:5] = torch.tensor([300])
assert torch.equal(req_to_token, expected), req_to_token

# Two KV buffers (rows of 3 float16 and of 2 int64): rows 0, 1 onto 1, 4 in both, the
# overlapping row read before it is written.
buffers = [torch.arange(18, dtype=torch.float16).view(6, 3), torch.arange(12).view(6, 2)]
before = [b.clone() for b in buffers]
ptrs = torch.tensor([b.data_ptr() for b in buffers])
strides = torch.tensor([b.stride(0) * b.element_size() for b in buffers])
copy_all_layer_kv_cache_cpu(ptrs, strides, torch.tensor([1, 4]), torch.tensor([0, 1]))
for now, was in zip(buffers, before):
    want = was.clone()
    want[1], want[4] = was[0], was[1]
    assert torch.equal(now, want), (now, want)
print("ok")
"""

COUNT = 24
PROMPTS = [[5, 6, 7, 8], [10, 20, 30], [300, 301, 302, 303, 304, 305, 306, 307, 308], [1, 99]]


def sglang_greedy(url: str) -> list[list[int]]:
    body = {
        "input_ids": PROMPTS,
        "sampling_params": {"temperature": 0, "max_new_tokens": COUNT, "ignore_eos": True},
    }
    request = urllib.request.Request(
        f"{url}/generate", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        answers = json.loads(response.read())
    return [answer["output_ids"] for answer in answers]


@pytest.mark.timeout(600)  # the session's server may start here: about a minute, cold
def test_greedy_answers_equal_transformers_own(real_sglang: RealSGLang) -> None:
    served = sglang_greedy(real_sglang.url)
    done = subprocess.run(
        [SGLANG_PYTHON, str(TINY_LLAMA), str(real_sglang.model), str(COUNT)],
        input=json.dumps(PROMPTS), capture_output=True, text=True, timeout=300,
        env=server_env(), check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    expected = json.loads(done.stdout.splitlines()[-1])
    assert [len(answer) for answer in served] == [COUNT] * len(PROMPTS)
    assert served == expected


def test_the_sgl_kernel_standin_does_what_sglangs_kernels_do() -> None:
    if not SGLANG_PYTHON:
        pytest.skip("GEN_TUI_SGLANG_PYTHON is not set: the stand-in needs its torch")
    done = subprocess.run(
        [SGLANG_PYTHON, "-c", KERNEL_CHECK], capture_output=True, text=True, timeout=120,
        env=server_env(), check=False,
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]
