"""This machine's GPUs through NVML: NVML's units mapped to the `Gpu` type nvidia-smi's rows
fill (MiB, W, %), a field a GPU does not support left unknown, its name made safe; and
without the package, the driver or a GPU, one reason, the same every time."""

from __future__ import annotations

import pytest

from gen_tui.backends.telemetry import nvml
from gen_tui.backends.telemetry.gpus import Gpu
from gen_tui.backends.telemetry.nvml import NvmlAbsent, NvmlError, read_gpus
from tests.support.nvml import GPUS, FakeGpu, fake_pynvml, installed


def test_nvml_readings_map_to_gpus() -> None:
    with installed(fake_pynvml(GPUS)):
        gpus = read_gpus()
    name = gpus[1].name  # untrusted text: the escape is made visible, never passed on
    assert name.startswith("NVIDIA H100 80GB HBM3") and "\x1b" not in name and name.endswith("[31m")
    assert gpus == (
        Gpu(0, "NVIDIA H100 80GB HBM3", 97.0, 75321.0, 81559.0, 612.4, 71.0),
        Gpu(1, name, 3.0, 1024.0, 81559.0, None, 35.0),
    )
    assert gpus[0].mem_fraction == pytest.approx(75321 / 81559)


def test_without_the_package_the_reason_says_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(nvml, "nvidia_device_present", lambda: True)
    with (
        installed(None),
        pytest.raises(NvmlAbsent, match=r"install nvidia-ml-py \(pip install 'gen-tui\[nvml\]'\)"),
    ):
        read_gpus()


def test_without_the_package_on_a_machine_without_a_gpu_no_advice_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 31, defect 18: a laptop or CI runner has no GPU: no nvidia-ml-py advice."""
    monkeypatch.setattr(nvml, "nvidia_device_present", lambda: False)
    with installed(None), pytest.raises(NvmlAbsent) as caught:
        read_gpus()
    assert str(caught.value) == "no NVIDIA GPU on this machine"


def test_without_a_driver_or_a_gpu_nvml_says_so_the_same_way_each_time() -> None:
    with installed(fake_pynvml(GPUS, init_error="Driver Not Loaded")):
        reasons = set()
        for _ in range(3):
            with pytest.raises(NvmlAbsent) as caught:
                read_gpus()
            reasons.add(str(caught.value))
        assert reasons == {"no NVIDIA driver or GPU here (NVML: Driver Not Loaded)"}
    with installed(fake_pynvml([])), pytest.raises(NvmlAbsent, match="NVML counts none"):
        read_gpus()


def test_a_failed_read_is_an_error_not_an_absence() -> None:
    gpus = [FakeGpu("A", 1, 1, 2, 1, 1)]
    module = fake_pynvml(gpus)
    with installed(module):
        assert len(read_gpus()) == 1

        def lost(handle: int) -> object:
            raise module.NVMLError("GPU is lost")

        module.nvmlDeviceGetMemoryInfo = lost
        with pytest.raises(NvmlError, match="NVML: GPU is lost"):
            read_gpus()
