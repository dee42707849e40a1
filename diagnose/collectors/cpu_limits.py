"""How many cores a process may use: its CPU affinity, capped by its container's CPU quota.

Thread pools size themselves from the cores they see: ``os.cpu_count()`` in a
pod limited to four CPUs on a 64-core node says 64, and a runtime that starts
a thread per core there starts 64 threads to share four cores' time. The
number that matters for over-parallelism is what the process may actually
use: the CPUs it may run on (``sched_getaffinity``, set by taskset, cpusets or
the kubelet's static CPU manager), and the CFS quota of its cgroup (a
container's CPU limit: ``cpu.max`` in cgroup v2, ``cpu.cfs_quota_us`` in v1),
whichever is smaller. Read once, when a process is first tracked.
"""

from __future__ import annotations

from pathlib import Path

import psutil

_CGROUP_ROOT = Path("/sys/fs/cgroup")


def cores_allowed(pid: int, cgroup_root: Path = _CGROUP_ROOT) -> float | None:
    """The cores ``pid`` may use (a quota may allow a fraction), or None where neither can be read."""
    limits = [limit for limit in (_affinity(pid), _quota_cores(pid, cgroup_root)) if limit is not None]
    return min(limits) if limits else None


def _affinity(pid: int) -> float | None:
    try:
        return float(len(psutil.Process(pid).cpu_affinity()))
    except (psutil.Error, AttributeError, OSError):  # gone, not ours, or no affinity on this OS
        return None


def _quota_cores(pid: int, root: Path) -> float | None:
    """The CFS quota of the process's cgroup in cores, or None (no limit, or not readable)."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2) if line.count(":") >= 2 else ("", "", "")
        relative = path.lstrip("/")
        if controllers == "":  # cgroup v2: one hierarchy, "0::/path"
            for folder in (root / relative, root):  # a container sees its own cgroup at the root
                quota = _v2_quota(folder / "cpu.max")
                if quota is not None:
                    return quota
        elif "cpu" in controllers.split(","):
            for mount in (root / controllers, root / "cpu", root / "cpu,cpuacct"):
                for folder in (mount / relative, mount):
                    quota = _v1_quota(folder)
                    if quota is not None:
                        return quota
    return None


def _v2_quota(path: Path) -> float | None:
    try:
        quota, period = path.read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        return None


def _v1_quota(folder: Path) -> float | None:
    try:
        quota = int((folder / "cpu.cfs_quota_us").read_text())
        period = int((folder / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return None if quota <= 0 or period <= 0 else quota / period
