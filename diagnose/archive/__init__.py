"""The performance archive: what each recording measured, what was changed, expected and gained."""

from diagnose.archive.store import Archive, ArchiveError, ComparisonRow, Entry, default_path

__all__ = ["Archive", "ArchiveError", "ComparisonRow", "Entry", "default_path"]
