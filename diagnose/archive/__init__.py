"""The performance archive: what each recording measured, what was changed, expected and gained."""

from diagnose.archive.store import Archive, CapacityRun, ComparisonRow, Entry, default_path
from diagnose.errors import ArchiveError

__all__ = ["Archive", "ArchiveError", "CapacityRun", "ComparisonRow", "Entry", "default_path"]
