"""The Prometheus HTTP API, as far as ``diagnose pull`` needs it: range queries and metric names.

The same API is served by Thanos, Mimir, Cortex and VictoriaMetrics, so one
client reads them all. Credentials (a bearer token or a user and password,
from a file or an environment variable) go into the request headers only:
they are never logged, never in an error message and never in a dump.

A server that says it is busy (429 Too Many Requests, 503 Service Unavailable)
is asked again after its ``Retry-After`` or an exponential pause, a few times,
before the request counts as failed: a fleet sweep's concurrent pulls must
not be what takes a small Prometheus down. A client is rebuilt from its
settings when it is sent to another process (a sweep's workers).
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from diagnose.errors import InputError, PullError

# Prometheus refuses a range query of more than 11,000 points a series; stay under it.
MAX_POINTS = 10_000
BUSY = (429, 503)  # the server's "not now": asked again after a pause
RETRIES = 4
FIRST_PAUSE_S = 0.5
LONGEST_PAUSE_S = 10.0


@dataclass(frozen=True)
class Auth:
    bearer_token: str | None = None
    basic: tuple[str, str] | None = None  # (user, password)

    @classmethod
    def from_options(
        cls,
        bearer_token_file: Path | None = None,
        bearer_token_env: str | None = None,
        basic_auth_file: Path | None = None,
        basic_auth_env: str | None = None,
    ) -> Auth:
        """A token or ``user:password``, each from a file or an environment variable (never a flag)."""
        token = _secret(bearer_token_file, bearer_token_env, "bearer token")
        basic = _secret(basic_auth_file, basic_auth_env, "basic auth")
        if token and basic:
            raise InputError("give a bearer token or basic auth, not both")
        if basic is not None:
            user, sep, password = basic.partition(":")
            if not sep or not user:
                raise InputError("basic auth: expected user:password in the file or variable")
            return cls(basic=(user, password))
        return cls(bearer_token=token)

    def headers(self) -> dict[str, str]:
        if self.bearer_token:
            return {"Authorization": f"Bearer {self.bearer_token}"}
        if self.basic:
            pair = base64.b64encode(f"{self.basic[0]}:{self.basic[1]}".encode()).decode()
            return {"Authorization": f"Basic {pair}"}
        return {}


class PrometheusClient:
    def __init__(self, url: str, auth: Auth = Auth(), ca_file: Path | None = None, timeout_s: float = 30.0):
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise InputError(f"--prometheus: expected an http:// or https:// URL, got {url!r}")
        if parsed.username or parsed.password:
            raise InputError(
                "--prometheus: put credentials in --basic-auth-file or --basic-auth-env, not the URL"
            )
        self.url = url.rstrip("/")
        self._auth, self._timeout, self._ca_file = auth, timeout_s, ca_file
        self._context = None
        if ca_file is not None:
            try:
                self._context = ssl.create_default_context(cafile=str(ca_file))
            except (OSError, ssl.SSLError) as error:
                raise InputError(f"--ca-file {ca_file}: cannot be used: {error}") from None

    def __reduce__(self) -> tuple[type, tuple]:
        """Sent to another process as its settings (an SSL context does not travel)."""
        return (PrometheusClient, (self.url, self._auth, self._ca_file, self._timeout))

    def query_range(self, query: str, start: float, end: float, step: float) -> list[tuple[dict, list]]:
        """``[(labels, [(ts, value), ...]), ...]``, read in pieces of at most MAX_POINTS steps."""
        series: dict[tuple, tuple[dict, list]] = {}
        piece = step * MAX_POINTS
        begin = start
        while begin <= end:
            stop = min(end, begin + piece - step)
            data = self._data("query_range", {"query": query, "start": begin, "end": stop, "step": step})
            for item in data.get("result", []):
                labels = item.get("metric", {})
                key = tuple(sorted(labels.items()))
                points = [(float(t), float(v)) for t, v in item.get("values", [])]
                series.setdefault(key, (labels, []))[1].extend(points)
            begin = stop + step
        return list(series.values())

    def query(self, query: str, at: float) -> list[dict]:
        """An instant query's result list (vectors and matrices as the API gives them)."""
        return self._data("query", {"query": query, "time": at}).get("result", [])

    def metric_names(self, match: str, start: float, end: float) -> set[str]:
        """The names of the series matching ``match`` in the window."""
        return self.label_values("__name__", match, start, end)

    def label_values(self, label: str, match: str, start: float, end: float) -> set[str]:
        """The values ``label`` takes on the series matching ``match`` in the window."""
        values = self._get(f"label/{label}/values", {"match[]": match, "start": start, "end": end})
        return {str(v) for v in values} if isinstance(values, list) else set()

    def _data(self, endpoint: str, params: dict) -> dict:
        """A query's data, which the API gives as an object (``resultType``, ``result``)."""
        data = self._get(endpoint, params)
        if not isinstance(data, dict):
            raise PullError(f"{self.url}: /api/v1/{endpoint} answered data that is not an object")
        return data

    def _get(self, endpoint: str, params: dict) -> dict | list:
        address = f"{self.url}/api/v1/{endpoint}?{urllib.parse.urlencode(params)}"
        request = urllib.request.Request(
            address, headers={"Accept": "application/json", **self._auth.headers()}
        )
        try:
            body = self._answer(request)
        except urllib.error.HTTPError as error:
            raise PullError(self._refused(endpoint, params, error)) from None
        except urllib.error.URLError as error:
            raise PullError(f"{self.url}: cannot connect: {error.reason}") from None
        except TimeoutError:
            raise PullError(f"{self.url}: no answer within {self._timeout:g} s") from None
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise PullError(
                f"{self.url}: the answer to /api/v1/{endpoint} is not JSON; is this a Prometheus API?"
            ) from None
        if not isinstance(body, dict) or body.get("status") != "success":
            problem = body.get("error") if isinstance(body, dict) else None
            raise PullError(f"{self.url}: /api/v1/{endpoint} failed: {problem or 'no status: success'}")
        return body.get("data", {})

    def _answer(self, request: urllib.request.Request) -> object:
        """The decoded answer; a busy server (429, 503) asked again after a pause, RETRIES times."""
        pause = FIRST_PAUSE_S
        for attempt in range(RETRIES + 1):
            try:
                with urllib.request.urlopen(
                    request, timeout=self._timeout, context=self._context
                ) as response:
                    return json.loads(response.read())
            except urllib.error.HTTPError as error:
                if error.code not in BUSY or attempt == RETRIES:
                    raise
                asked = _retry_after(error)
                _pause(min(LONGEST_PAUSE_S, pause if asked is None else asked))
                pause *= 2
        raise AssertionError("unreachable")  # the last attempt returns or raises

    def _refused(self, endpoint: str, params: dict, error: urllib.error.HTTPError) -> str:
        if error.code in (401, 403):
            return (
                f"{self.url}: {error.code} {error.reason}: the server wants credentials "
                "(--bearer-token-file/--bearer-token-env or --basic-auth-file/--basic-auth-env)"
                if error.code == 401
                else f"{self.url}: 403 Forbidden: these credentials may not read this API"
            )
        try:
            detail = json.loads(error.read()).get("error", "")
        except (json.JSONDecodeError, AttributeError, OSError):
            detail = ""
        query = f" for {params['query']!r}" if "query" in params else ""
        return f"{self.url}: /api/v1/{endpoint}{query}: HTTP {error.code} {error.reason}" + (
            f": {detail}" if detail else ""
        )


def _pause(seconds: float) -> None:
    time.sleep(seconds)


def _retry_after(error: urllib.error.HTTPError) -> float | None:
    """The seconds a busy server asks to wait (``Retry-After: 2``); None for a date or nothing."""
    value = error.headers.get("Retry-After") if error.headers is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _secret(path: Path | None, variable: str | None, what: str) -> str | None:
    if path is not None and variable is not None:
        raise InputError(f"{what}: give a file or an environment variable, not both")
    if path is not None:
        try:
            value = path.read_text(encoding="utf-8").strip()
        except OSError as error:
            raise InputError(f"{path}: cannot read the {what}: {error.strerror or error}") from None
        if not value:
            raise InputError(f"{path}: the {what} file is empty")
        return value
    if variable is not None:
        value = os.environ.get(variable, "").strip()
        if not value:
            raise InputError(f"${variable}: not set or empty; expected the {what}")
        return value
    return None
