"""The performance archive: what each recording measured, what was changed, expected and gained."""

from diagnose.archive.store import Archive, ComparisonRow, Entry, default_path
from diagnose.errors import ArchiveError

__all__ = ["Archive", "ArchiveError", "ComparisonRow", "Entry", "default_path"]
