"""The second process of a big comparison: it measures one side and writes its evidence as JSON.

Started by :class:`diagnose.compare.parallel.Elsewhere`. The evidence goes as
plain JSON (replicates and samples as base64 of little-endian float32), which
runs no code when read back.
"""

from __future__ import annotations

import argparse
import base64
import json
from dataclasses import fields
from pathlib import Path

import numpy as np

from diagnose.compare.comparison import measure_path
from diagnose.compare.evidence import Evidence
from diagnose.compare.measure import Measure
from diagnose.gain import ExpectedGain
from diagnose.processes.heap import leave_the_rest_to_exit, reuse_freed_memory


def to_json(evidence: Evidence) -> dict:
    """The evidence as JSON-ready data (shallow: its arrays are packed, never deep-copied first)."""
    data = {item.name: getattr(evidence, item.name) for item in fields(evidence)}
    data["measures"] = [
        {item.name: getattr(m, item.name) for item in fields(m)}
        | {"replicates": None if m.replicates is None else _packed(m.replicates)}
        for m in evidence.measures.values()
    ]
    data["samples"] = {name: _packed(values) for name, values in evidence.samples.items()}
    data["gains"] = {cause: gain.to_dict() for cause, gain in evidence.gains.items()}
    return data


def from_json(data: dict) -> Evidence:
    measures = {}
    for entry in data["measures"]:
        packed = entry.pop("replicates")
        measures[entry["name"]] = Measure(**entry, replicates=None if packed is None else _unpacked(packed))
    return Evidence(
        data["dump"],
        tuple(data["window"]),
        int(data["requests"]),
        int(data["cold_excluded"]),
        measures,
        {name: _unpacked(text) for name, text in data["samples"].items()},
        {str(k): str(v) for k, v in data["environment"].items()},
        {str(k): float(v) for k, v in data["background"].items()},
        [(str(i), float(s)) for i, s in data["hypotheses"]],
        [str(w) for w in data["warnings"]],
        {str(cause): ExpectedGain.from_dict(gain) for cause, gain in data.get("gains", {}).items()},
    )


def _packed(values: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(values, dtype="<f4").tobytes()).decode("ascii")


def _unpacked(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype="<f4").copy()


def _main() -> None:
    reuse_freed_memory()

    parser = argparse.ArgumentParser(prog="python -m diagnose.compare.side_process")
    parser.add_argument("dump")
    parser.add_argument("out", type=Path)
    parser.add_argument("--rules", type=Path)
    parser.add_argument("--tz")
    args = parser.parse_args()
    # The parent measures the other side meanwhile: both cores are busy without a spike helper.
    evidence, _ = measure_path(args.dump, args.rules, args.tz, helper=False)
    temporary = args.out.with_suffix(".tmp")
    temporary.write_text(json.dumps(to_json(evidence)), encoding="utf-8")
    temporary.replace(args.out)
    leave_the_rest_to_exit()  # the parent waits for this exit


if __name__ == "__main__":
    _main()
