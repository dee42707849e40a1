"""One fuzz case: a damaged real sample through every importer, the reader and, optionally, the analysis.

An *escape* is an exception out of an importer's ``read`` (the reader would
contain it, but it is a bug all the same), any exception out of ``load_dump``
other than the one-line ``DumpError``, any exception out of the analysis, or
a report warning that calls itself a bug.
"""

from __future__ import annotations

import traceback
from pathlib import Path

from diagnose.dump import load_dump
from diagnose.errors import DumpError
from diagnose.importers import HEAD_BYTES, IMPORTERS, Source
from tests.helpers.mutate import mutate


def escapes(
    sample: Path, mutations: list[int], seed: int, folder: Path, analyse: bool, rules=None
) -> list[str]:
    """What escaped for this case (empty when nothing did)."""
    data = mutate(sample.read_bytes(), mutations, seed)
    target = folder / sample.name
    folder.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    found: list[str] = []
    head = data[:HEAD_BYTES].decode("utf-8", errors="replace")
    for importer in IMPORTERS:
        try:
            if importer.recognise(head):
                importer.read(Source.from_path(target))
        except Exception:  # noqa: BLE001 - what the fuzzer is looking for
            found.append(f"{importer.name}: {_last_frame()}")
    try:
        dump = load_dump(str(folder))
    except DumpError:
        return found
    except Exception:  # noqa: BLE001
        return [*found, f"load_dump: {_last_frame()}"]
    if analyse:
        from diagnose.pipeline import analyse_dump

        try:
            report = analyse_dump(dump, rules).report
        except Exception:  # noqa: BLE001
            return [*found, f"analyse: {_last_frame()}"]
        found += [f"warning: {w}" for w in report.evidence.warnings if "This is a bug" in w]
    return found


def _last_frame() -> str:
    """The exception and where in diagnose it was raised, in one line."""
    lines = traceback.format_exc().strip().splitlines()
    ours = [line.strip() for line in lines if "diagnose/" in line]
    return f"{lines[-1]} at {ours[-1] if ours else '?'}"
