"""Let PyPI's torchvision import on CPU torch, in every process of the tests' real SGLang server.

SGLang imports torchvision at import time (`import sglang` patches transformers' image
processors, and its configs package imports InternVL's image transforms). PyPI's torchvision
is linked against CUDA torch: on the CPU torch its C ops do not load, and its import then
fails declaring fake kernels for the two ops it declares unconditionally (`torchvision::nms`
does not exist). Declaring those two schemas first lets the real torchvision import; a text
model never calls them. (tests/support/sglang_metrics_probe.py does the same in-process.)

Python imports `sitecustomize` at start-up from sys.path: the fixture puts this folder on the
server's PYTHONPATH, which its spawned scheduler and detokenizer processes inherit. The
schemas are declared when torchvision is first looked for, so a process that never imports it
never imports torch for it.
"""

from __future__ import annotations

import sys
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

_LIBRARIES: list[Any] = []


class _DeclareTorchvisionOps(MetaPathFinder):
    """On the first lookup of torchvision: declare its ops' schemas, then step aside."""

    def find_spec(
        self, fullname: str, path: Any = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname == "torchvision" and self in sys.meta_path:
            sys.meta_path.remove(self)
            import torch

            library = torch.library.Library("torchvision", "DEF")
            for op in ("nms", "qnms"):
                library.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
            _LIBRARIES.append(library)  # the schemas live as long as their Library
        return None


sys.meta_path.insert(0, _DeclareTorchvisionOps())
