"""GPUs through NVML (the nvidia-ml-py binding), usable without any UI.

NVML is initialised once and device handles and static facts (name, maximum
SM clock) are cached. Every field is read through :func:`_read`, which turns
"not supported" into a missing value rather than an error. A GPU that falls
off the bus mid-recording becomes an event and is skipped from then on; the
recording goes on. On a machine without a GPU or driver, :class:`GpuCollector`
raises :class:`NvmlUnavailable` once, with a message for the user.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import psutil
import pynvml

_MISSING = (
    pynvml.NVMLError_NotSupported,
    pynvml.NVMLError_NoPermission,
    pynvml.NVMLError_NotFound,
    pynvml.NVMLError_FunctionNotFound,
    pynvml.NVMLError_NoData,
)
_LOST = (pynvml.NVMLError_GpuIsLost, pynvml.NVMLError_Unknown)
_THROTTLE_NAMES = {
    pynvml.nvmlClocksThrottleReasonGpuIdle: "gpu_idle",
    pynvml.nvmlClocksThrottleReasonApplicationsClocksSetting: "applications_clocks",
    pynvml.nvmlClocksThrottleReasonSwPowerCap: "sw_power_cap",
    pynvml.nvmlClocksThrottleReasonHwSlowdown: "hw_slowdown",
    pynvml.nvmlClocksThrottleReasonSyncBoost: "sync_boost",
    pynvml.nvmlClocksThrottleReasonSwThermalSlowdown: "sw_thermal_slowdown",
    pynvml.nvmlClocksThrottleReasonHwThermalSlowdown: "hw_thermal_slowdown",
    pynvml.nvmlClocksThrottleReasonHwPowerBrakeSlowdown: "hw_power_brake_slowdown",
    pynvml.nvmlClocksThrottleReasonDisplayClockSetting: "display_clocks",
}


class NvmlUnavailable(Exception):
    """No GPU can be read on this machine; the message says why, for the user."""


class _GpuLost(Exception):
    pass


@dataclass
class _Device:
    index: int
    handle: object
    name: str
    max_sm_clock_mhz: int | None
    lost: bool = False


@dataclass
class GpuSample:
    gpus: list[dict] = field(default_factory=list)
    processes: list[dict] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)


def throttle_names(mask: int | None) -> str | None:
    """NVML's throttle-reason bitmask as ``;``-joined names (the dump accepts either)."""
    if mask is None:
        return None
    names = [name for bit, name in _THROTTLE_NAMES.items() if mask & bit]
    return ";".join(names) if names else "none"


class GpuCollector:
    def __init__(self) -> None:
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as error:
            raise NvmlUnavailable(f"no GPU can be read: NVML says {error}") from None
        self._devices = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = _read(pynvml.nvmlDeviceGetName, handle)
            name = name.decode() if isinstance(name, bytes) else name
            max_clock = _read(pynvml.nvmlDeviceGetMaxClockInfo, handle, pynvml.NVML_CLOCK_SM)
            self._devices.append(_Device(index, handle, name or f"GPU {index}", max_clock))
        if not self._devices:
            pynvml.nvmlShutdown()
            raise NvmlUnavailable("NVML found no GPU on this machine")

    @property
    def names(self) -> list[str]:
        return [d.name for d in self._devices]

    def versions(self) -> dict[str, str]:
        """The driver's version and the CUDA version it supports, for the manifest's environment."""
        found = {}
        try:
            driver = pynvml.nvmlSystemGetDriverVersion()
            found["driver_version"] = driver.decode() if isinstance(driver, bytes) else str(driver)
        except pynvml.NVMLError:
            pass
        try:
            cuda = int(pynvml.nvmlSystemGetCudaDriverVersion())  # 12040 -> 12.4
            found["cuda_version"] = f"{cuda // 1000}.{cuda % 1000 // 10}"
        except (pynvml.NVMLError, TypeError, ValueError):
            pass
        return found

    def sample(self, ts: float) -> GpuSample:
        result = GpuSample()
        for device in self._devices:
            if device.lost:
                continue
            try:
                result.gpus.append(self._gpu_row(device, ts))
                result.processes += self._process_rows(device, ts)
            except _GpuLost as lost:
                device.lost = True
                result.events.append(
                    {
                        "ts": ts,
                        "kind": "gpu_lost",
                        "gpu": device.index,
                        "message": f"GPU {device.index} ({device.name}) stopped answering NVML: {lost}",
                    }
                )
        return result

    def close(self) -> None:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass

    def _gpu_row(self, device: _Device, ts: float) -> dict:
        h = device.handle
        util = _read(pynvml.nvmlDeviceGetUtilizationRates, h)
        memory = _read(pynvml.nvmlDeviceGetMemoryInfo, h)
        power = _read(pynvml.nvmlDeviceGetPowerUsage, h)
        limit = _read(pynvml.nvmlDeviceGetEnforcedPowerLimit, h)
        tx = _read(pynvml.nvmlDeviceGetPcieThroughput, h, pynvml.NVML_PCIE_UTIL_TX_BYTES)
        rx = _read(pynvml.nvmlDeviceGetPcieThroughput, h, pynvml.NVML_PCIE_UTIL_RX_BYTES)
        return {
            "ts": ts,
            "gpu": device.index,
            "util_pct": None if util is None else util.gpu,
            "mem_bw_util_pct": None if util is None else util.memory,
            "mem_used_bytes": None if memory is None else memory.used,
            "mem_total_bytes": None if memory is None else memory.total,
            "sm_clock_mhz": _read(pynvml.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_SM),
            "max_sm_clock_mhz": device.max_sm_clock_mhz,
            "power_w": None if power is None else power / 1000,
            "power_limit_w": None if limit is None else limit / 1000,
            "temp_c": _read(pynvml.nvmlDeviceGetTemperature, h, pynvml.NVML_TEMPERATURE_GPU),
            "throttle_reasons": throttle_names(_read(pynvml.nvmlDeviceGetCurrentClocksThrottleReasons, h)),
            "pcie_tx_bytes_per_s": None if tx is None else tx * 1024,  # NVML reports KB/s
            "pcie_rx_bytes_per_s": None if rx is None else rx * 1024,
        }

    def _process_rows(self, device: _Device, ts: float) -> list[dict]:
        rows: dict[int, dict] = {}
        for query in (
            pynvml.nvmlDeviceGetComputeRunningProcesses,
            pynvml.nvmlDeviceGetGraphicsRunningProcesses,
        ):
            for process in _read(query, device.handle) or []:
                used = getattr(process, "usedGpuMemory", None)
                row = rows.setdefault(
                    process.pid,
                    {
                        "ts": ts,
                        "gpu": device.index,
                        "pid": process.pid,
                        "name": _process_name(process.pid),
                        "mem_used_bytes": 0,
                    },
                )
                row["mem_used_bytes"] += used or 0
        return list(rows.values())


def _read(function, *args):
    """One NVML field: its value, or None when the GPU does not support it."""
    try:
        return function(*args)
    except _MISSING:
        return None
    except _LOST as error:
        raise _GpuLost(str(error)) from None


def _process_name(pid: int) -> str | None:
    """The process may have exited between NVML's list and this look-up."""
    try:
        return psutil.Process(pid).name()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None
