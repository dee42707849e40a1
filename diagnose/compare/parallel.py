"""The before side of a big comparison, measured in a second process while this one measures the after side.

Each side's reading and analysis is mostly one core's work, so two day-long
dumps take nearly twice as long one after the other as side by side. The
second process is a fresh ``python -m diagnose.compare.parallel`` that
measures one dump and writes its evidence as JSON (replicates as base64 of
little-endian float32): plain data, nothing that runs code when read back. A
second process that fails or dies costs only time: the side is then measured
here, where its errors are reported as usual.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import fields
from pathlib import Path

import numpy as np

from diagnose.compare.evidence import Evidence
from diagnose.compare.measure import Measure
from diagnose.heap import reuse_freed_memory

# Below this many bytes on disk a dump is measured in a second or two, less than a second process's start.
MIN_BYTES = 16 * 2**20


def worth_it(path: str) -> bool:
    if len(os.sched_getaffinity(0)) < 2:
        return False
    target = Path(path)
    files = [target] if target.is_file() else [p for p in target.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files) >= MIN_BYTES


class Elsewhere:
    """A side being measured by a second process; :meth:`result` waits for it (None if it failed)."""

    def __init__(self, path: str, rules_dir: Path | None, tz: str | None, salt: int) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="diagnose-compare-")
        self._out = Path(self._folder.name) / "evidence.json"
        command = [
            sys.executable,
            "-m",
            "diagnose.compare.parallel",
            path,
            str(self._out),
            "--salt",
            str(salt),
        ]
        command += ["--rules", str(rules_dir)] if rules_dir else []
        command += ["--tz", tz] if tz else []
        root = str(Path(__file__).resolve().parents[2])
        environ = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
        }
        self._process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environ
        )

    def result(self) -> Evidence | None:
        try:
            if self._process.wait() != 0 or not self._out.exists():
                return None
            return from_json(json.loads(self._out.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        finally:
            self._folder.cleanup()

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        self._folder.cleanup()


def to_json(evidence: Evidence) -> dict:
    """The evidence as JSON-ready data (shallow: its arrays are packed, never deep-copied first)."""
    data = {item.name: getattr(evidence, item.name) for item in fields(evidence)}
    data["measures"] = [
        {item.name: getattr(m, item.name) for item in fields(m)}
        | {"replicates": None if m.replicates is None else _packed(m.replicates)}
        for m in evidence.measures.values()
    ]
    data["samples"] = {name: _packed(values) for name, values in evidence.samples.items()}
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
    )


def _packed(values: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(values, dtype="<f4").tobytes()).decode("ascii")


def _unpacked(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype="<f4").copy()


def _main() -> None:
    from diagnose.compare import measure_path

    reuse_freed_memory()

    parser = argparse.ArgumentParser(prog="python -m diagnose.compare.parallel")
    parser.add_argument("dump")
    parser.add_argument("out", type=Path)
    parser.add_argument("--salt", type=int, default=0)
    parser.add_argument("--rules", type=Path)
    parser.add_argument("--tz")
    args = parser.parse_args()
    # The parent measures the other side meanwhile: both cores are busy without a spike helper.
    evidence, _ = measure_path(args.dump, args.rules, args.tz, salt=args.salt, helper=False)
    temporary = args.out.with_suffix(".tmp")
    temporary.write_text(json.dumps(to_json(evidence)), encoding="utf-8")
    temporary.replace(args.out)


if __name__ == "__main__":
    _main()
