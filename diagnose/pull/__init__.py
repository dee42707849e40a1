"""``diagnose pull``: a window of a host's evidence read from Prometheus (or Thanos, Mimir,
VictoriaMetrics) through its HTTP API, written as a normal dump."""

from diagnose.errors import PullError
from diagnose.pull.client import Auth, PrometheusClient
from diagnose.pull.fleet import sweep
from diagnose.pull.pull import PullSummary, pull

__all__ = ["Auth", "PrometheusClient", "PullError", "PullSummary", "pull", "sweep"]
