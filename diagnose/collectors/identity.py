"""Which host this is: its name, its machine id and its boot, as a recording's manifest keeps them.

``diagnose verify`` runs its checks on the host it runs on; a dump from another host would have this
host's processes judged against that host's incident. The machine id (``/etc/machine-id``, systemd's,
stable across reboots and renames) tells hosts apart where it is recorded; the host name where it is
not; the boot id (``/proc/sys/kernel/random/boot_id``) says the host was restarted since.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_MACHINE_ID = Path("/etc/machine-id")
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


@dataclass(frozen=True)
class HostIdentity:
    host: str | None
    machine_id: str | None = None
    boot_id: str | None = None

    def manifest_fields(self) -> dict[str, str]:
        """What a recording's manifest keeps of it (docs/dump-format.md)."""
        fields = {"machine_id": self.machine_id, "boot_id": self.boot_id}
        return {key: value for key, value in fields.items() if value}


def this_host() -> HostIdentity:
    return HostIdentity(socket.gethostname(), _read(_MACHINE_ID), _read(_BOOT_ID))


def recorded_host(host: str | None, manifest_extra: dict[str, Any]) -> HostIdentity:
    """The identity a dump's manifest states (any of it may be missing)."""

    def text(key: str) -> str | None:
        value = manifest_extra.get(key)
        return str(value).strip() or None if value is not None else None

    return HostIdentity(host, text("machine_id"), text("boot_id"))


@dataclass(frozen=True)
class Comparison:
    same: bool | None  # None: the dump does not say which host recorded it
    reason: str  # in words, for the report


def compare(recorded: HostIdentity, here: HostIdentity) -> Comparison:
    """Whether a dump recorded as ``recorded`` is of the host ``here``, and why it is judged so."""
    if recorded.machine_id and here.machine_id:
        if recorded.machine_id != here.machine_id:
            named = f" ({recorded.host})" if recorded.host else ""
            said = f"the dump was recorded on another machine{named}: its machine id differs"
            return Comparison(False, said)
        rebooted = recorded.boot_id and here.boot_id and recorded.boot_id != here.boot_id
        said = ", restarted since (another boot id)" if rebooted else ""
        return Comparison(True, f"the dump was recorded on this machine{said}")
    if recorded.host and here.host:
        if recorded.host != here.host:
            said = f"the dump was recorded on {recorded.host}, and this host is {here.host}"
            return Comparison(False, said)
        return Comparison(True, f"the dump was recorded on this host ({here.host})")
    return Comparison(None, "the dump does not say which host recorded it")


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None
