"""This machine's GPUs from NVML (`nvidia-ml-py`, optional: `pip install 'gen-tui[nvml]'`).

Local hosts and the in-process engine read their GPUs here, in the process, rather than by
running nvidia-smi every two seconds. NVML is optional and so is a driver: without the
package, the library or a GPU the reader says why once (:class:`NvmlAbsent`) and the caller
shows nothing. Each call blocks for a few milliseconds (a driver call per field): call it
from a thread, never from a UI loop.
"""

from __future__ import annotations

import importlib
import shutil
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

from gen_tui.backends.telemetry.gpus import MAX_GPUS, Gpu, parse_gpus

__all__ = ["NvmlAbsent", "NvmlError", "forget", "read_gpus"]

MIB = 1024 * 1024

_lock = threading.Lock()
_nvml: ModuleType | None = None
_absent: str | None = None


def nvidia_device_present() -> bool:
    """Whether this machine shows an NVIDIA driver or device at all (Linux's /proc and /dev
    entries, or nvidia-smi on the PATH). Why: without the package, advice to install it is
    right on a GPU box and noise on a laptop or a CI runner (the headless demo, `sim`)."""
    if Path("/proc/driver/nvidia").exists() or shutil.which("nvidia-smi") is not None:
        return True
    try:
        return any(Path("/dev").glob("nvidia[0-9]*"))
    except OSError:
        return False


class NvmlAbsent(Exception):
    """No GPU telemetry here, for good: the package, the driver or a GPU is missing."""


class NvmlError(Exception):
    """One read failed (a GPU fell off the bus, say): worth saying, worth trying again."""


def _init() -> ModuleType:
    """pynvml, initialised once per process; NvmlAbsent (the same reason every time) else."""
    global _nvml, _absent
    with _lock:
        if _nvml is not None:
            return _nvml
        if _absent is not None:
            raise NvmlAbsent(_absent)
        try:
            module = importlib.import_module("pynvml")
        except ImportError:
            _absent = (
                "no NVML here: install nvidia-ml-py (pip install 'gen-tui[nvml]')"
                if nvidia_device_present()
                else "no NVIDIA GPU on this machine"
            )
            raise NvmlAbsent(_absent) from None
        try:
            module.nvmlInit()
            count = module.nvmlDeviceGetCount()
        except module.NVMLError as exc:
            _absent = f"no NVIDIA driver or GPU here (NVML: {exc})"
            raise NvmlAbsent(_absent) from None
        if count < 1:
            _absent = "no NVIDIA GPU here (NVML counts none)"
            raise NvmlAbsent(_absent)
        _nvml = module
        return module


def _field(nvml: ModuleType, call: Any, *args: Any) -> Any:
    """A field a GPU may not support ("[N/A]" in nvidia-smi's words): None then."""
    try:
        return call(*args)
    except nvml.NVMLError_NotSupported:
        return None


def _row(nvml: ModuleType, index: int) -> dict[str, Any]:
    """One GPU in the watcher's row shape (so parse_gpus checks NVML's values as it checks
    nvidia-smi's): utilisation %, memory MiB, power W (NVML says mW), temperature °C."""
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    name = nvml.nvmlDeviceGetName(handle)
    rates = _field(nvml, nvml.nvmlDeviceGetUtilizationRates, handle)
    memory = _field(nvml, nvml.nvmlDeviceGetMemoryInfo, handle)
    power = _field(nvml, nvml.nvmlDeviceGetPowerUsage, handle)
    temp = _field(nvml, nvml.nvmlDeviceGetTemperature, handle, nvml.NVML_TEMPERATURE_GPU)
    return {
        "index": index,
        "name": name.decode("utf-8", "replace") if isinstance(name, bytes) else name,
        "util": rates.gpu if rates is not None else None,
        "mem_used": memory.used / MIB if memory is not None else None,
        "mem_total": memory.total / MIB if memory is not None else None,
        "power": power / 1000 if power is not None else None,
        "temp": temp,
    }


def read_gpus() -> tuple[Gpu, ...]:
    """Every GPU of this machine now. Raises NvmlAbsent (for good) or NvmlError (this time)."""
    nvml = _init()
    try:
        count = nvml.nvmlDeviceGetCount()
        return parse_gpus([_row(nvml, index) for index in range(min(count, MAX_GPUS))])
    except nvml.NVMLError as exc:
        raise NvmlError(f"NVML: {exc}") from None


def forget() -> None:
    """Look for NVML afresh at the next read (after installing it; the tests swap it)."""
    global _nvml, _absent
    with _lock:
        _nvml, _absent = None, None
