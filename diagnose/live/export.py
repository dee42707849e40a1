"""Where the view's ``m`` writes its Markdown report, and under what name."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path


def default_export_dir() -> Path:
    """Where ``m`` writes when not told: the user's state folder, not wherever the view was started (a
    git clone, the folder of the dump being replayed): ``$XDG_STATE_HOME/diagnose/exports``."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state).resolve() / "diagnose" / "exports"


def export_path(folder: Path, host: str, at: float | None) -> Path:
    """A new file name in ``folder``, absolute: the notice says exactly where the report went. Named by
    the time it shows (a replayed dump's own time, not the wall clock's)."""
    folder = folder.resolve()
    stamp = (datetime.fromtimestamp(at, UTC) if at is not None else datetime.now(UTC)).strftime(
        "%Y%m%d-%H%M%S"
    )
    path = folder / f"diagnose-{host}-{stamp}.md"
    counter = 1
    while path.exists():
        counter += 1
        path = folder / f"diagnose-{host}-{stamp}-{counter}.md"
    return path
