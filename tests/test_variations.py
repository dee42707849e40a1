"""One draw of each of the second generator's variations (fixtures/variations.py), analysed as diagnose
file does: the true cause ranks first, and healthy dumps and near misses get no likely finding.

benchmarks/bench_robustness.py draws more seeds and prints the per-cause table.
"""

from __future__ import annotations

import pytest

from diagnose.pipeline import analyse
from fixtures.variations import VARIATIONS, write_variation


@pytest.mark.parametrize("variation", VARIATIONS, ids=[v.name for v in VARIATIONS])
def test_the_cause_ranks_first_and_quiet_dumps_stay_quiet(variation, tmp_path):
    report = analyse(str(write_variation(variation, tmp_path / variation.name, seed=7)))
    ranked = [(h.id, h.score) for h in report.hypotheses]
    if variation.cause is None:
        assert [h for h in ranked if h[1] >= 0.5] == [], ranked
    else:
        assert ranked and ranked[0][0] == variation.cause, ranked
