"""What a load run is: the target, the requests it sends, and its stages. Plain data, JSON both ways,
because the engine runs in a process of its own (and, distributed, on other machines)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from diagnose.errors import InputError


class Api(StrEnum):
    """How a request is written and its answer read."""

    CHAT = "chat"  # OpenAI-compatible /v1/chat/completions, streamed
    COMPLETIONS = "completions"  # OpenAI-compatible /v1/completions, streamed
    HTTP = "http"  # any JSON endpoint: a body template, the whole answer is one response


def error_said(body: str) -> str:
    """What an error answer says: the message of an OpenAI-style error body (``{"error": {"message":
    ...}}``; vLLM's ``{"message": ...}``; TGI's ``{"error": "..."}``), else the body's start."""
    try:
        answer = json.loads(body)
    except ValueError:
        answer = None
    if isinstance(answer, dict):
        error = answer.get("error")
        message = error.get("message") if isinstance(error, dict) else error or answer.get("message")
        if isinstance(message, str) and message.strip():
            body = message
    return body[:240].strip()


class StageKind(StrEnum):
    BASELINE = "baseline"  # one request at a time: does it answer, and how fast when alone
    STEP = "step"  # open-loop arrivals at one rate
    SOAK = "soak"  # open-loop arrivals held near the knee


@dataclass(frozen=True)
class Target:
    """Where requests go and how they are written."""

    url: str  # the endpoint itself: http://host:8000/v1/chat/completions, http://host:8700/generate
    api: Api
    model: str | None = None  # the OpenAI APIs' "model" field (many servers ignore it)
    body: dict[str, Any] | None = None  # http: a JSON body whose "{{prompt}}"/"{{max_tokens}}" are filled
    headers: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 60.0

    @property
    def base(self) -> str:
        parts = urlsplit(self.url)
        return f"{parts.scheme}://{parts.netloc}"


@dataclass(frozen=True)
class Prompt:
    """One request's content: its text, how many tokens it may answer with, and its length class."""

    text: str
    max_tokens: int
    size: str = ""  # short, medium, long: the mix it was drawn from ("" when not classed)

    @property
    def words(self) -> int:
        return len(self.text.split())


@dataclass(frozen=True)
class Stage:
    """One stage of a run: open-loop arrivals at ``rate_rps`` for ``duration_s`` (a baseline sends one
    request at a time instead)."""

    index: int
    kind: StageKind
    duration_s: float
    rate_rps: float | None = None  # None for the baseline

    @property
    def name(self) -> str:
        if self.kind is StageKind.BASELINE:
            return "baseline"
        return f"{self.kind.value} {self.index} at {self.rate_rps:.3g} req/s"


@dataclass(frozen=True)
class Settings:
    """How the run proceeds; every default is the method's (docs/load.md)."""

    baseline_s: float = 20.0
    step_s: float = 30.0
    start_rps: float | None = None  # None: half of what one client alone achieves
    growth: float = 2.0  # each step's rate over the last, until the service stops keeping up
    resolution: float = 0.15  # then halve the bracket until its width is this share of its low end
    max_steps: int = 12
    soak_share: float = 0.7  # of the highest rate kept up with
    soak_s: float = 600.0
    seed: int = 0
    processes: int = 1  # Locust processes sending: 1 here, or the workers of a distributed run

    def check(self) -> None:
        """Every figure in range, or an InputError naming the option."""
        if not self.baseline_s > 0 or not self.step_s > 0:
            raise InputError("--baseline and --step: expected positive durations")
        if self.start_rps is not None and not self.start_rps > 0:
            raise InputError(f"--start-rate {self.start_rps:g}: expected a positive rate (requests a second)")
        if not self.growth > 1:
            raise InputError(f"--growth {self.growth:g}: expected a factor above 1")
        if not 0 < self.resolution < 1:
            raise InputError(f"--resolution {self.resolution:g}: expected a share between 0 and 1")
        if not 0 < self.soak_share <= 1:
            raise InputError(f"--share {self.soak_share:g}: expected a share of the knee in (0, 1]")
        if self.soak_s < 0:
            raise InputError("--soak: expected a duration (0: no soak)")
        if self.max_steps < 2:
            raise InputError(f"--max-steps {self.max_steps}: expected at least 2")


def to_json(value: Target | Prompt | Stage | Settings) -> dict[str, Any]:
    return asdict(value)


def target_from_json(data: dict[str, Any]) -> Target:
    return Target(**{**data, "api": Api(data["api"])})


def stage_from_json(data: dict[str, Any]) -> Stage:
    return Stage(**{**data, "kind": StageKind(data["kind"])})


def prompt_from_json(data: dict[str, Any]) -> Prompt:
    return Prompt(**data)
