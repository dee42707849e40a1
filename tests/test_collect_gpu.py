"""The NVML collector, with NVML faked at the binding's boundary (the pynvml module)."""

from __future__ import annotations

from types import SimpleNamespace

import pynvml
import pytest

from diagnose.collectors.gpu import GpuCollector, NvmlUnavailable, throttle_names

GIB = 2**30


def _error(code):
    return pynvml.NVMLError(code)


class FakeNvml:
    """Two GPUs; GPU 1 supports neither power nor PCIe counters; GPU 1 can be lost."""

    def __init__(self):
        self.lost = set()
        self.processes = {
            0: [
                SimpleNamespace(pid=4242, usedGpuMemory=40 * GIB),
                SimpleNamespace(pid=999_999, usedGpuMemory=2 * GIB),
            ],
            1: [],
        }

    def install(self, monkeypatch):
        for name in [
            "nvmlInit",
            "nvmlShutdown",
            "nvmlDeviceGetCount",
            "nvmlDeviceGetHandleByIndex",
            "nvmlDeviceGetName",
            "nvmlDeviceGetMaxClockInfo",
            "nvmlDeviceGetUtilizationRates",
            "nvmlDeviceGetMemoryInfo",
            "nvmlDeviceGetPowerUsage",
            "nvmlDeviceGetEnforcedPowerLimit",
            "nvmlDeviceGetPcieThroughput",
            "nvmlDeviceGetClockInfo",
            "nvmlDeviceGetTemperature",
            "nvmlDeviceGetCurrentClocksThrottleReasons",
            "nvmlDeviceGetComputeRunningProcesses",
            "nvmlDeviceGetGraphicsRunningProcesses",
            "nvmlSystemGetDriverVersion",
            "nvmlSystemGetCudaDriverVersion",
        ]:
            monkeypatch.setattr(pynvml, name, getattr(self, name))

    def _check(self, handle):
        if handle in self.lost:
            raise _error(pynvml.NVML_ERROR_GPU_IS_LOST)

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetName(self, handle):
        return b"NVIDIA H200" if handle == 0 else "NVIDIA L4"

    def nvmlDeviceGetMaxClockInfo(self, handle, clock):
        return 1980

    def nvmlDeviceGetUtilizationRates(self, handle):
        self._check(handle)
        return SimpleNamespace(gpu=87 if handle == 0 else 3, memory=40)

    def nvmlDeviceGetMemoryInfo(self, handle):
        self._check(handle)
        return SimpleNamespace(used=42 * GIB, total=141 * GIB, free=99 * GIB)

    def nvmlDeviceGetPowerUsage(self, handle):
        if handle == 1:
            raise _error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return 512_000

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        if handle == 1:
            raise _error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return 700_000

    def nvmlDeviceGetPcieThroughput(self, handle, counter):
        if handle == 1:
            raise _error(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return 2048

    def nvmlDeviceGetClockInfo(self, handle, clock):
        return 1410

    def nvmlDeviceGetTemperature(self, handle, sensor):
        return 71

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle):
        return pynvml.nvmlClocksThrottleReasonSwPowerCap | pynvml.nvmlClocksThrottleReasonHwThermalSlowdown

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        self._check(handle)
        return self.processes[handle]

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle):
        raise _error(pynvml.NVML_ERROR_NOT_SUPPORTED)

    def nvmlSystemGetDriverVersion(self):
        return b"550.54.15"

    def nvmlSystemGetCudaDriverVersion(self):
        return 12040


@pytest.fixture
def nvml(monkeypatch):
    fake = FakeNvml()
    fake.install(monkeypatch)
    return fake


def test_every_gpu_field_is_read_and_unsupported_ones_are_missing(nvml):
    collector = GpuCollector()
    assert collector.names == ["NVIDIA H200", "NVIDIA L4"]
    sample = collector.sample(100.0)
    first, second = sample.gpus
    assert first == {
        "ts": 100.0,
        "gpu": 0,
        "util_pct": 87,
        "mem_bw_util_pct": 40,
        "mem_used_bytes": 42 * GIB,
        "mem_total_bytes": 141 * GIB,
        "sm_clock_mhz": 1410,
        "max_sm_clock_mhz": 1980,
        "power_w": 512.0,
        "power_limit_w": 700.0,
        "temp_c": 71,
        "throttle_reasons": "sw_power_cap;hw_thermal_slowdown",
        "pcie_tx_bytes_per_s": 2048 * 1024,
        "pcie_rx_bytes_per_s": 2048 * 1024,
    }
    assert second["power_w"] is None and second["pcie_tx_bytes_per_s"] is None
    assert second["util_pct"] == 3


def test_per_process_gpu_memory_survives_a_vanished_process(nvml):
    sample = GpuCollector().sample(1.0)
    by_pid = {row["pid"]: row for row in sample.processes}
    assert by_pid[4242]["mem_used_bytes"] == 40 * GIB
    assert by_pid[999_999]["name"] is None  # no such process any more: name unknown, row kept


def test_a_lost_gpu_becomes_an_event_and_the_others_go_on(nvml):
    collector = GpuCollector()
    collector.sample(1.0)
    nvml.lost.add(1)
    sample = collector.sample(2.0)
    assert [row["gpu"] for row in sample.gpus] == [0]
    assert [event["kind"] for event in sample.events] == ["gpu_lost"]
    assert sample.events[0]["gpu"] == 1
    later = collector.sample(3.0)
    assert [row["gpu"] for row in later.gpus] == [0] and later.events == []


def test_no_driver_is_one_clear_error(monkeypatch):
    def missing():
        raise _error(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    monkeypatch.setattr(pynvml, "nvmlInit", missing)
    with pytest.raises(NvmlUnavailable, match="no GPU can be read"):
        GpuCollector()


def test_throttle_reasons_are_named():
    assert throttle_names(0) == "none"
    assert throttle_names(None) is None
    assert throttle_names(pynvml.nvmlClocksThrottleReasonGpuIdle) == "gpu_idle"


def test_the_driver_and_cuda_versions_are_read_for_the_manifest(nvml):
    collector = GpuCollector()
    assert collector.versions() == {"driver_version": "550.54.15", "cuda_version": "12.4"}
    collector.close()
