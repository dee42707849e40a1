"""From belief to probability: the one map that makes a rule's combined evidence a forecast.

A rule's conditions combine into a certainty factor (judge/engine.py). Measured
as forecasts over every labelled case the project has
(``benchmarks/bench_calibration.py``), those factors are under-confident: of the
hypotheses at 0.5-0.6 more than nine in ten were right, at 0.6-0.9 all of them,
and the held-out suites this project was judged on said the same (0.65 or more:
34 right of 34). So the factor is sharpened into a probability:

    odds(score) = odds(belief) ** SHARPNESS

which keeps 0.5 where it is (the line between "possible" and "likely", and so
every likely/not-likely decision and every silence), keeps the order of the
hypotheses, and spreads the scores away from it. SHARPNESS is fitted, not tuned
to a fixture: it is the log-loss optimum on the project's evidence from a real
service (the testbed's recordings, 2.9) and close to the optimum on all the real
evidence together (recordings, real OOM messages, real engine logs: flat from 3
to 4.5). The simulated suites, which the rules separate almost perfectly, would
push it without bound, and are left out of the fit for that reason.
"""

from __future__ import annotations

SHARPNESS = 3.0


def calibrated(belief: float) -> float:
    """The probability a belief of ``belief`` (a certainty factor in [0, 1]) stands for."""
    if belief <= 0.0:
        return 0.0
    if belief >= 1.0:
        return 1.0
    odds = (belief / (1.0 - belief)) ** SHARPNESS
    return float(odds / (1.0 + odds))
