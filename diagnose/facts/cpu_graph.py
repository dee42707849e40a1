"""What a profile of a model run on the host says (onnxruntime on CPU, a PyTorch CPU trace): its operators.

With no GPU in the profile, the step is the operators, one after another on
the host. Fusion's work shows in their sequence: three or more elementwise or
simple reduction operators in a row (a LayerNorm or a GELU written out as
ReduceMean, Sub, Pow, ..., Div, Erf, Add, Mul) each read and write the whole
tensor and pay their dispatch, where a fused graph runs one operator. Only
the outermost operators count (a framework operator's children are its own
work), per step (``ProfilerStep#N``, onnxruntime's ``model_run#N``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from diagnose.dump.model import Dump
from diagnose.facts.model import Facts

CHAIN = 3  # operators in a row that fusion would make one
# Operators that read and write a tensor element by element, or reduce it simply: what graph optimisers
# and compilers fuse. By op type, framework prefix and in-place suffix dropped (aten::add_ is add).
FUSABLE = frozenset(
    "add sub mul div pow sqrt rsqrt reciprocal erf exp log neg abs relu sigmoid tanh cast to where clamp "
    "clip min max minimum maximum reducemean reducesum reducemax mean sum equal less greater not and or "
    "softplus sign floor ceil round square".split()
)


def add_cpu_graph_facts(facts: Facts, dump: Dump) -> None:
    if "gpu_activity" in dump.traces:  # a GPU profile: its kernels are the step (diagnose.facts.gpu_trace)
        return
    calls = dump.traces.get("host_calls")
    if calls is None or not {"kind", "name", "dur_us", "step"} <= set(calls.columns):
        return
    operators = calls[(calls["kind"].to_numpy() == "operator") & calls["step"].notna().to_numpy()]
    if not len(operators):
        return
    facts.add("trace.kernels", 0, f"{dump.source('host_calls')}: no GPU activity, the model ran on the host")
    outer = operators[_outermost(operators)]
    source = f"{dump.source('host_calls')}: operators within each step, outermost only"
    per_step = outer.groupby("step", observed=True)
    facts.add("trace.ops_per_step", float(per_step.size().median()), source)
    facts.add("trace.op_median_us", float(outer["dur_us"].median()), source)
    chained = np.concatenate([_in_chain(step) for _, step in per_step])
    total = float(outer["dur_us"].sum())
    if total > 0:
        time = np.concatenate([step["dur_us"].to_numpy(dtype="float64") for _, step in per_step])
        facts.add(
            "trace.host_chain_share",
            float(time[chained].sum() / total),
            f"{source}: time in runs of {CHAIN} or more elementwise or reduction operators in a row",
        )


def _outermost(operators: pd.DataFrame) -> np.ndarray:
    """Operators not inside another on the same thread (sorted by start, as the reader sorts them)."""
    keep = np.ones(len(operators), dtype=bool)
    threads = operators["thread"].to_numpy() if "thread" in operators else np.zeros(len(operators))
    start = operators["ts"].to_numpy(dtype="float64")
    end = start + operators["dur_us"].to_numpy(dtype="float64")
    for thread in pd.unique(threads):
        rows = np.flatnonzero(threads == thread)
        reach = np.maximum.accumulate(end[rows])
        keep[rows[1:]] = start[rows[1:]] >= reach[:-1]
    return keep


def _in_chain(step: pd.DataFrame) -> np.ndarray:
    """Per operator of one step, in order: whether it is in a run of CHAIN or more fusable ones."""
    names = step["name"].astype(str).str.lower().str.replace(r"^\w+::", "", regex=True).str.rstrip("_")
    return in_runs(names.isin(FUSABLE).to_numpy())


def in_runs(fusable: np.ndarray) -> np.ndarray:
    """Whether each item is in a run of CHAIN or more consecutive fusable ones."""
    chained = np.zeros(fusable.size, dtype=bool)
    run_start = None
    for index, flag in enumerate(np.append(fusable, False)):
        if flag and run_start is None:
            run_start = index
        elif not flag and run_start is not None:
            if index - run_start >= CHAIN:
                chained[run_start:index] = True
            run_start = None
    return chained
