"""What saturates at the knee: the server host recorded through the run, analysed where it fell behind.

With ``diagnose load --record`` the project's recorder samples this machine (the
server's host: its CPU, its GPUs, the busiest processes and threads, the
server's ``/metrics``) into ``server/`` inside the run's folder while the load
runs. Afterwards the steps at and past the knee (the last step that kept up
and every step above it) are analysed as ``diagnose file`` analyses a dump:
the recording cut to those steps' time, with the run's own requests beside it,
judged by the rules into ranked hypotheses: the slots, a CPU stage, the GPU,
memory, whichever the evidence shows. With ``--record-metrics`` the server runs
elsewhere and only its ``/metrics`` are recorded, from the load's machine
(``diagnose record --no-host``): its own gauges (requests running and waiting,
the KV cache) judge the knee, and the rules that need the host say so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from diagnose.errors import DiagnoseError

SERVER_FOLDER = "server"  # the recording, inside the run's folder


def diagnose_knee(run: Path, result: dict[str, Any], rules_dir: Path | None = None) -> dict[str, Any] | None:
    """``{"steps", "window", "hypotheses", "problem"}`` of the steps at and past the knee; None where no
    knee was found (nothing fell behind) or nothing was recorded."""
    from diagnose.dump import load_dump
    from diagnose.dump.timestamps import iso
    from diagnose.judge import default_rules_dir, load_rules
    from diagnose.pipeline import analyse_dump

    knee = result["knee"]
    if not knee.get("found") or not (run / SERVER_FOLDER).is_dir():
        return None
    steps = [s["index"] for s in result["steps"] if s["offered_rps"] >= knee["kept_up_rps"] - 1e-9]
    try:
        own = load_dump(str(run))
        requests = own.tables.get("requests")
        server = load_dump(str(run / SERVER_FOLDER))
    except DiagnoseError as error:
        return {"steps": steps, "window": None, "hypotheses": [], "problem": str(error)}
    if requests is None or "load_stage" not in requests:
        return {
            "steps": steps,
            "window": None,
            "hypotheses": [],
            "problem": "the run's requests were not read",
        }
    chosen = requests[requests["load_stage"].isin(steps)]
    ends = chosen["ts"] + chosen["latency_ms"].fillna(0) / 1000
    start, end = float(chosen["ts"].min()), float(ends.max())
    spans = [(float(g["ts"].min()), float(ends[g.index].max())) for _, g in chosen.groupby("load_stage")]
    # Only the knee's own requests: the steps between them in time (the bisection goes down and up) are
    # other loads. The service's own log (--server-log), where recorded, says more than the load's
    # (its stages); else the load's requests. A server start before the window is history the window
    # does not show (the run's baseline and first steps warmed it); a restart inside it is evidence.
    logged = server.tables.get("requests")
    if logged is not None and len(logged) and "ts" in logged:
        times = logged["ts"].to_numpy(dtype=float)
        inside = sum(((times >= a) & (times <= b) for a, b in spans), start=times < 0)
        server.tables["requests"] = logged[inside]
    else:
        server.tables["requests"] = chosen.drop(columns=["load_stage"])
        server.files["requests"] = [f"../{name}" for name in own.files.get("requests", [])]
    server.manifest.process_starts = [t for t in server.manifest.process_starts if start <= t <= end]
    window = server.between(start, end)
    report = analyse_dump(window, load_rules(rules_dir or default_rules_dir())).report
    return {
        "steps": steps,
        "window": {"start": iso(start), "end": iso(end)},
        "hypotheses": [h.brief() for h in report.hypotheses],
        "problem": None,
    }
