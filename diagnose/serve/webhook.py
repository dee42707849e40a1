"""Alertmanager's webhook body (version 4), read and checked: what ``diagnose serve`` accepts.

The body is Alertmanager's documented JSON (``version``, ``groupKey``,
``status``, ``alerts[]`` each with ``status``, ``labels``, ``annotations``,
``startsAt``, ``endsAt``, ``generatorURL``, ``fingerprint``). A body that is
not that is a :class:`WebhookError` naming the field and what was expected;
Alertmanager does not retry a 4xx, so the reason is also logged on our side.
An alert is one incident by its fingerprint (its label set's hash) and the
time it started firing: a group re-sent every ``repeat_interval`` carries the
same pair, and a new incident of the same alert a new start.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

VERSION = "4"
_STATUSES = ("firing", "resolved")


class WebhookError(ValueError):
    """A body that is not Alertmanager's webhook: ``status`` is the HTTP answer (4xx), the text the reason."""

    def __init__(self, reason: str, status: int = 400) -> None:
        super().__init__(reason)
        self.status = status


@dataclass(frozen=True)
class Alert:
    fingerprint: str
    status: str  # "firing" or "resolved"
    labels: dict[str, str]
    annotations: dict[str, str]
    starts_at: float  # epoch seconds, UTC
    ends_at: float | None  # None while firing with no end set (Alertmanager's 0001-01-01)
    generator_url: str

    @property
    def name(self) -> str:
        return self.labels.get("alertname", "unnamed alert")

    @property
    def key(self) -> str:
        """The incident's address: its fingerprint and start, e.g. ``3f2a9c1d0b7e4a55-20261206T154935Z``."""
        return f"{self.fingerprint}-{stamp(self.starts_at)}"


@dataclass(frozen=True)
class Notification:
    receiver: str
    status: str
    group_key: str
    external_url: str
    alerts: tuple[Alert, ...]


def read_notification(body: bytes) -> Notification:
    """The notification in ``body``, or a :class:`WebhookError` that says what is wrong and where."""
    try:
        data = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError:
        raise WebhookError("the body is not UTF-8 text") from None
    except json.JSONDecodeError as error:
        raise WebhookError(f"not JSON: line {error.lineno}, column {error.colno}: {error.msg}") from None
    if not isinstance(data, dict):
        raise WebhookError(f"expected a JSON object (Alertmanager's webhook), got {_kind(data)}")
    version = data.get("version")
    if version != VERSION:
        raise WebhookError(f"version: expected {VERSION!r} (Alertmanager's webhook), got {version!r}")
    alerts = data.get("alerts")
    if not isinstance(alerts, list):
        raise WebhookError(f"alerts: expected a list, got {_kind(alerts)}")
    return Notification(
        _text(data, "receiver", "", required=False),
        _choice(data, "status", "", _STATUSES),
        _text(data, "groupKey", "", required=False),
        _text(data, "externalURL", "", required=False),
        tuple(_alert(alert, f"alerts[{index}]") for index, alert in enumerate(alerts)),
    )


def _alert(data: object, where: str) -> Alert:
    if not isinstance(data, dict):
        raise WebhookError(f"{where}: expected an object, got {_kind(data)}")
    fingerprint = _text(data, "fingerprint", where)
    if not fingerprint or not all(c.isalnum() for c in fingerprint) or len(fingerprint) > 64:
        raise WebhookError(
            f"{where}.fingerprint: expected Alertmanager's hexadecimal hash, got {fingerprint!r}"
        )
    ends_at = _time(data, "endsAt", where, required=False)
    return Alert(
        fingerprint,
        _choice(data, "status", where, _STATUSES),
        _labels(data, "labels", where),
        _labels(data, "annotations", where, required=False),
        _time(data, "startsAt", where),  # type: ignore[arg-type]  # required: never None
        ends_at if ends_at is not None and ends_at > 0 else None,
        _text(data, "generatorURL", where, required=False),
    )


def _text(data: dict, field: str, where: str, required: bool = True) -> str:
    value = data.get(field)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise WebhookError(f"{_at(where, field)}: expected a string, got {_kind(value)}")
    return value


def _choice(data: dict, field: str, where: str, allowed: tuple[str, ...]) -> str:
    value = _text(data, field, where)
    if value not in allowed:
        raise WebhookError(f"{_at(where, field)}: expected one of {', '.join(allowed)}, got {value!r}")
    return value


def _labels(data: dict, field: str, where: str, required: bool = True) -> dict[str, str]:
    value = data.get(field)
    if value is None and not required:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise WebhookError(f"{_at(where, field)}: expected an object of strings, got {_kind(value)}")
    return dict(value)


def _time(data: dict, field: str, where: str, required: bool = True) -> float | None:
    value = data.get(field)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise WebhookError(f"{_at(where, field)}: expected an RFC 3339 time, got {_kind(value)}")
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise WebhookError(f"{_at(where, field)}: expected an RFC 3339 time, got {value!r}") from None
    if moment.tzinfo is None:
        raise WebhookError(f"{_at(where, field)}: {value!r} has no zone (Alertmanager sends one)")
    if moment.year <= 1:  # Go's zero time: "no end yet"
        return 0.0
    return moment.timestamp()


def stamp(epoch: float) -> str:
    """``20261206T154935Z``: a start time as it goes into an address or a folder name."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y%m%dT%H%M%SZ")


def _at(where: str, field: str) -> str:
    return f"{where}.{field}" if where else field


def _kind(value: object) -> str:
    if value is None:
        return "nothing"
    names = {dict: "an object", list: "a list", str: "a string", bool: "true or false"}
    return names.get(type(value), "a number" if isinstance(value, int | float) else type(value).__name__)
