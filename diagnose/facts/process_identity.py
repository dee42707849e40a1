"""The facts that name a process a finding is about: as the report says it, its pid, its name."""

from __future__ import annotations

import pandas as pd

from diagnose.dump.processes import GROUP
from diagnose.facts.model import Facts


def add_process_identity(
    facts: Facts, prefix: str, frame: pd.DataFrame, ids: pd.Series, process_id: float, who: str, cite: str
) -> pd.DataFrame:
    """``{prefix}.process`` (``who``: :func:`diagnose.dump.processes.describe`), ``.pid`` for a real pid,
    and ``.name``; returns the process's rows. ``ids`` are :func:`diagnose.dump.processes.process_ids`."""
    facts.add(f"{prefix}.process", who, cite)
    if process_id >= 0:
        facts.add(f"{prefix}.pid", int(process_id), cite)
    rows = frame.loc[ids == process_id]
    names = rows["name"] if "name" in rows.columns else rows.get(GROUP, pd.Series(dtype="string"))
    if names.notna().any():
        facts.add(f"{prefix}.name", str(names.dropna().iloc[-1]), cite)
    return rows
