"""A stand-in `pynvml` (nvidia-ml-py) for machines without a GPU (CI): a module put in
`sys.modules` that answers NVML's calls the way the real one does (bytes or str names,
memory in bytes, power in mW, NVMLError_NotSupported for a field a GPU lacks)."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from gen_tui.backends.telemetry import nvml

MIB = 1024 * 1024


@dataclass
class FakeGpu:
    name: str | bytes
    util: int
    used_mib: int
    total_mib: int
    power_mw: int | None
    """None: the GPU does not support the reading (NVMLError_NotSupported)."""
    temp: int


GPUS = [
    FakeGpu(b"NVIDIA H100 80GB HBM3", 97, 75321, 81559, 612_400, 71),
    FakeGpu("NVIDIA H100 80GB HBM3\x1b[31m", 3, 1024, 81559, None, 35),
]


def fake_pynvml(gpus: list[FakeGpu], init_error: str | None = None) -> types.ModuleType:
    """A `pynvml` whose nvmlInit fails with `init_error` (no driver) or serves `gpus`."""
    module = types.ModuleType("pynvml")

    class NVMLError(Exception):
        pass

    class NVMLError_NotSupported(NVMLError):
        pass

    def init() -> None:
        if init_error is not None:
            raise NVMLError(init_error)

    def power(handle: int) -> int:
        value = gpus[handle].power_mw
        if value is None:
            raise NVMLError_NotSupported("Not Supported")
        return value

    def temperature(handle: int, sensor: int) -> int:
        assert sensor == module.NVML_TEMPERATURE_GPU
        return gpus[handle].temp

    module.__dict__.update(
        NVMLError=NVMLError,
        NVMLError_NotSupported=NVMLError_NotSupported,
        NVML_TEMPERATURE_GPU=0,
        nvmlInit=init,
        nvmlDeviceGetCount=lambda: len(gpus),
        nvmlDeviceGetHandleByIndex=lambda index: index,
        nvmlDeviceGetName=lambda handle: gpus[handle].name,
        nvmlDeviceGetUtilizationRates=lambda handle: types.SimpleNamespace(
            gpu=gpus[handle].util, memory=0
        ),
        nvmlDeviceGetMemoryInfo=lambda handle: types.SimpleNamespace(
            used=gpus[handle].used_mib * MIB, total=gpus[handle].total_mib * MIB
        ),
        nvmlDeviceGetPowerUsage=power,
        nvmlDeviceGetTemperature=temperature,
    )
    return module


@contextmanager
def installed(module: types.ModuleType | None) -> Iterator[None]:
    """`module` as `pynvml` (None: not installed) for the block; NVML looked up afresh."""
    missing = object()
    before = sys.modules.get("pynvml", missing)
    sys.modules["pynvml"] = module  # type: ignore[assignment]  (None makes import fail)
    nvml.forget()
    try:
        yield
    finally:
        if before is missing:
            sys.modules.pop("pynvml", None)
        else:
            sys.modules["pynvml"] = before  # type: ignore[assignment]
        nvml.forget()
