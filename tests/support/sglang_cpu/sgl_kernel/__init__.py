"""A stand-in for `sgl_kernel`'s CPU build, for the real SGLang 0.5.23 server the tests run.

SGLang's CPU engine (`SGLANG_USE_CPU_ENGINE=1 ... --device cpu`) imports two functions from
sgl_kernel at module level (`srt/mem_cache/allocation.py` and
`kernels/ops/kvcache/cache_move.py`), and sgl_kernel's CPU build is not on PyPI (its wheels
there are CUDA builds). For a dense Llama under `--attention-backend torch_native` nothing
else of sgl_kernel is needed: these two, in plain torch with the semantics of SGLang's own
triton kernels for the same job, are enough (plain serving does not even call them: the
first places slots for speculative decoding, the second moves KV rows; they are faithful
anyway, and tests/integration/test_real_sglang_kernel.py checks them). The speculative
modules' CPU names, imported on every server's import chain too, raise if ever called. The
test fixture puts this folder's parent on the server's PYTHONPATH
(tests/support/real_sglang.py); nothing of gen-tui imports it.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import torch

__version__ = "0.0.0+gen-tui-standin"


def assign_req_to_token_pool_cpu(
    req_pool_indices: torch.Tensor,
    req_to_token: torch.Tensor,
    start_offset: torch.Tensor,
    end_offset: torch.Tensor,
    out_cache_loc: torch.Tensor,
    pool_len: int,
) -> None:
    """Request i's new KV slots into its row of the token pool: `out_cache_loc` holds every
    request's slots back to back, and request i's (`end - start` of them) go to
    `req_to_token[req_pool_indices[i], start[i]:end[i]]` (allocation.py's
    `assign_req_to_token_pool`). `pool_len` is the row length (the kernel's pointer stride)."""
    del pool_len  # req_to_token's own rows carry it
    taken = 0
    rows = req_pool_indices.tolist()
    starts, ends = start_offset.tolist(), end_offset.tolist()
    for row, start, end in zip(rows, starts, ends, strict=True):
        count = end - start
        if count > 0:
            req_to_token[row, start:end] = out_cache_loc[taken : taken + count].to(
                req_to_token.dtype
            )
        taken += count


def copy_all_layer_kv_cache_cpu(
    data_ptrs: torch.Tensor, strides: torch.Tensor, tgt_loc: torch.Tensor, src_loc: torch.Tensor
) -> None:
    """In every KV buffer (one per layer and K/V, given by its address and its row size in
    bytes), copy rows `src_loc` onto rows `tgt_loc` (cache_move.py's
    `copy_all_layer_kv_cache_tiled`). All source rows are read before any is written, so
    overlapping moves are safe."""
    src, tgt = src_loc.to(torch.int64), tgt_loc.to(torch.int64)
    if src.numel() == 0:
        return
    rows = int(torch.maximum(src.max(), tgt.max()).item()) + 1
    for address, stride in zip(data_ptrs.tolist(), strides.tolist(), strict=True):
        raw = (ctypes.c_uint8 * (rows * stride)).from_address(address)
        buffer = torch.from_numpy(np.ctypeslib.as_array(raw)).view(rows, stride)
        buffer[tgt] = buffer[src]


def _speculative_only(name: str) -> Any:
    """A name SGLang's speculative-decoding modules import on the CPU at module level (they
    load on every server's import chain); only a speculative run calls it, and the tests'
    server runs none: calling it says so instead of computing something wrong."""

    def unsupported(*args: object, **kwargs: object) -> None:
        raise NotImplementedError(f"sgl_kernel.{name}: speculative decoding has no stand-in")

    unsupported.__name__ = name
    return unsupported


build_tree_kernel_efficient_cpu = _speculative_only("build_tree_kernel_efficient_cpu")
verify_tree_greedy_cpu = _speculative_only("verify_tree_greedy_cpu")
assign_draft_cache_locs_contiguous_cpu = _speculative_only("assign_draft_cache_locs_contiguous_cpu")
assign_extend_cache_locs_cpu = _speculative_only("assign_extend_cache_locs_cpu")
fill_accept_out_cache_loc_cpu = _speculative_only("fill_accept_out_cache_loc_cpu")
fill_bonus_tokens_cpu = _speculative_only("fill_bonus_tokens_cpu")
rotate_input_ids_cpu = _speculative_only("rotate_input_ids_cpu")
