"""onnxruntime's own profile of a model run on the CPU: written out, a graph unfused is told from one fused.

The profiles are made here by onnxruntime itself (the testbed's model, with its LayerNorms and GELU
written out in elementwise operators), with its graph optimisations off and on: how they are read and
what their structure is. Whether the unfused one is diagnosed as such is judged on the testbed's
recordings, whose timings do not depend on the machine running the tests.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime")

from diagnose.dump import load_dump  # noqa: E402
from diagnose.facts import compute_facts  # noqa: E402
from diagnose.facts.cpu_graph import FUSABLE, in_runs  # noqa: E402
from testbed.model import Model  # noqa: E402


@pytest.fixture(scope="module")
def profiles(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ort")
    made = {}
    for optimizations in ("off", "all"):
        path = folder / f"{optimizations}.json"
        Model(seed=0, decomposed=True, optimizations=optimizations, profile_to=path)
        made[optimizations] = path
    return made


def test_the_profile_is_read_as_operators_in_runs(profiles):
    dump = load_dump(str(profiles["off"]))
    assert dump.importers[0]["importer"] == "onnxruntime-profile"
    calls = dump.traces["host_calls"]
    runs = calls[calls["kind"] == "annotation"]
    assert list(runs["name"].astype(str)) == [f"model_run#{i}" for i in range(len(runs))]
    operators = calls[calls["kind"] == "operator"]
    assert {"MatMul", "ReduceMean", "Erf"} <= set(operators["name"].astype(str))  # op types, not node names
    assert operators["step"].notna().all()
    events = json.loads(profiles["off"].read_text())
    nodes = [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    assert len(operators) == len(nodes)


def test_the_unfused_graph_has_chains_of_small_operators_and_the_fused_none(profiles):
    """The graph's structure, not its timings: how long each operator takes here is this machine's (a
    loaded 2-core machine gave the chains 9 % of operator time where a quiet one gives them 30 %)."""
    unfused, fused = (compute_facts(load_dump(str(profiles[k]))) for k in ("off", "all"))
    assert unfused.number("trace.ops_per_step") > 2 * fused.number("trace.ops_per_step")
    assert _chained_operator_share(profiles["off"]) >= 0.5  # LayerNorm and GELU written out, on every run
    assert _chained_operator_share(profiles["all"]) == 0.0
    assert unfused.number("trace.host_chain_share") > 0.0
    assert fused.number("trace.host_chain_share") == 0.0
    assert unfused.number("trace.kernels") == 0  # a run on the host: no GPU to wait on


def _chained_operator_share(profile: Path) -> float:
    """The share of a step's operators, counted, in runs of three or more elementwise or reduction ones."""
    operators = load_dump(str(profile)).traces["host_calls"].query("kind == 'operator'")
    names = operators["name"].astype(str).str.lower()
    per_step = [in_runs(step.isin(FUSABLE).to_numpy()) for _, step in names.groupby(operators["step"])]
    return float(sum(chained.sum() for chained in per_step) / len(operators))


RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "recorded"


def test_unfused_operators_is_found_on_the_recorded_unfused_profile_only(tmp_path, report_of):
    """Judged on the testbed's recorded profiles (fixtures/recorded/), not on a run made here: how long
    each operator takes is the machine's, and a loaded 2-core machine stretches the gaps between them.
    A live run is judged by benchmarks/bench_testbed.py (unfused-operators and its fusion-on twin)."""
    reports = {}
    for run in ("unfused-operators", "fusion-on"):
        folder = tmp_path / run
        folder.mkdir()
        shutil.copy(RECORDED / run / "dump" / "onnxruntime_profile.json.gz", folder)
        reports[run] = report_of(folder)
    unfused, fused = reports["unfused-operators"], reports["fusion-on"]
    assert unfused["hypotheses"][0]["id"] == "unfused-operators" and unfused["hypotheses"][0]["score"] >= 0.5
    assert "unfused-operators" in {r["id"] for r in fused["ruled_out"]}
    assert not [h for h in fused["hypotheses"] if h["score"] >= 0.5]
