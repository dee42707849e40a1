"""``diagnose alerts``: Prometheus alerting rules whose thresholds a baseline's own variation sets.

- :mod:`~diagnose.alerting.baseline`: the key figures evaluated as the rules will be, and their thresholds;
- :mod:`~diagnose.alerting.rules`: the PromQL from the engines' metric names, as a rules file and as a
  ``PrometheusRule``.
"""

from diagnose.alerting.baseline import Figure, Threshold, baseline_series, threshold
from diagnose.alerting.rules import alerting_rules, check_selector, prometheus_rule, rules_file

__all__ = [
    "Figure",
    "Threshold",
    "alerting_rules",
    "baseline_series",
    "check_selector",
    "prometheus_rule",
    "rules_file",
    "threshold",
]
