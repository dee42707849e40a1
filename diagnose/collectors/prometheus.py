"""Scrape a serving engine's Prometheus ``/metrics`` into the server table, once an interval.

Which metric becomes which column, for each engine, is
:func:`diagnose.engines.metrics.engine_maps`, shared with the importer of scrape files;
a service of one's own is mapped with ``--metrics-map`` (:func:`custom_map`).
"""

from __future__ import annotations

import urllib.error
import urllib.request

from diagnose.engines.metrics import (
    EngineMap,
    custom_map,
    detect_engine,
    engine_maps,
    engine_row,
    parse_samples,
)


class MetricsScraper:
    def __init__(
        self,
        url: str,
        engine: str = "auto",
        timeout_s: float = 0.5,
        metrics_map: dict[str, str] | None = None,
    ) -> None:
        """``metrics_map``: a service's own metric -> server column (``--metrics-map``); no engine then."""
        self.url, self.engine, self.timeout_s = url, "custom" if metrics_map else engine, timeout_s
        self.metrics_map = dict(metrics_map or {})
        self.custom_metrics = tuple(self.metrics_map)
        self._custom: EngineMap | None = custom_map(metrics_map) if metrics_map else None
        self._previous: tuple[float, dict[str, float]] | None = None
        self.last_samples: dict[str, float] = {}  # the last scrape, to tell an unknown engine from a dead one

    def fetch(self) -> str:
        with urllib.request.urlopen(self.url, timeout=self.timeout_s) as response:  # noqa: S310 - user's URL
            return response.read().decode("utf-8", errors="replace")

    def sample(self, ts: float, monotonic: float) -> dict | None:
        """One server row, or None while the first scrape only sets the baseline for rates.

        Raises OSError / ValueError when the endpoint cannot be read or parsed.
        """
        samples = self.last_samples = parse_samples(self.fetch())
        if self.engine == "auto":
            self.engine = detect_engine(samples) or "auto"
        mapping = self._custom or engine_maps().get(self.engine or "")
        previous, self._previous = self._previous, (monotonic, samples)
        if mapping is None:
            return None
        if previous is None:
            return engine_row(mapping, ts, samples)
        return engine_row(mapping, ts, samples, previous[1], monotonic - previous[0])


SCRAPE_FAILURES = (urllib.error.URLError, OSError, ValueError)
