"""``torch.cuda.memory_summary()`` pasted from the middle of its table: read by the rows and columns the
function writes (torch/cuda/memory.py), whatever the paste kept of them.

The tables are built as ``memory_summary`` builds them: its metrics in its order, each with its large-
and small-pool rows, and its ``_format_size`` choosing a unit per column from the metric's "all" figure
(B, KB, MB, ... before torch 2.0; B, KiB, MiB, ... after; binary both times).
"""

from __future__ import annotations

import pytest

from diagnose.importers import mend, recognise
from diagnose.importers.base import Source
from tests.conftest import SHARED_DATA

MIB = 2**20
MEMSUM_B = SHARED_DATA / "real-samples" / "field-2026-12-b" / "memsum"
_SIZES = (
    "Allocated memory",
    "Active memory",
    "Requested memory",
    "GPU reserved memory",
    "Non-releasable memory",
)
_COUNTS = ("Allocations", "Active allocs", "GPU reserved segments", "Non-releasable allocs")


def _size(size: int, preferred: int, prefixes: tuple[str, ...]) -> str:
    """memory_summary's _format_size: the unit steps up while the metric's "all" figure is 768 of it."""
    prefix = prefixes[0]
    for step in prefixes[1:]:
        if preferred < 768 * 1024:
            break
        prefix, size, preferred = step, size // 1024, preferred / 1024
    return f"{size:6d} {prefix}"


def _summary(stats: dict[str, tuple[int, int, int, int]], new_units: bool, device: int = 0) -> str:
    """The whole printout for "all"-pool figures (current, peak, allocated, freed) per metric; each pool
    row takes half of them (units still chosen by the "all" row, as the function does)."""
    prefixes = (
        ("B  ", "KiB", "MiB", "GiB", "TiB", "PiB") if new_units else ("B ", "KB", "MB", "GB", "TB", "PB")
    )
    lines = [
        "=" * 75,
        f" {'':16} PyTorch CUDA memory summary, device ID {device:<17d} ",
        "-" * 75,
        f"  {'':9} CUDA OOMs: {0:<12d} | {'':6} cudaMalloc retries: {3:<8d}  ",
        "=" * 75,
        "        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  ",
    ]
    for name in (*_SIZES, *_COUNTS):
        if name not in stats:
            continue
        lines.append("-" * 75)
        figures = stats[name]
        for label, share in ((name, 1), ("      from large pool", 0.5), ("      from small pool", 0.5)):
            if name in _SIZES:
                cells = [_size(int(f * share), f, prefixes) for f in figures]
            else:
                cells = [f"{int(f * share):7d}  " for f in figures]
            lines.append(f" {label:<21} | " + " | ".join(cells) + " ")
    lines.append("=" * 75)
    return "|" + "|\n|".join(lines) + "|\n"


STATS = {
    "Allocated memory": (6000 * MIB, 6100 * MIB, 20000 * MIB, 14000 * MIB),
    "Active memory": (6000 * MIB, 6100 * MIB, 20000 * MIB, 14000 * MIB),
    "Requested memory": (5900 * MIB, 6000 * MIB, 19000 * MIB, 13100 * MIB),
    "GPU reserved memory": (8184 * MIB, 9330 * MIB, 15628 * MIB, 7444 * MIB),
    "Non-releasable memory": (202300 * 1024, 1563 * MIB, 10613 * MIB, 10415 * MIB),
    "Allocations": (545, 545, 662, 117),
    "Active allocs": (545, 545, 662, 117),
    "GPU reserved segments": (32, 33, 37, 5),
}


def _read(text: str):
    mended = mend(text).text
    importer = recognise(mended)
    assert importer is not None and importer.name == "pytorch-memory"
    return importer.read(Source("summary.txt", mended, 1_765_000_000.0))


def _from(text: str, metric: str) -> str:
    """The paste: from a metric's row on (the header lost), its last row cut after its second cell."""
    start = text.index(f"| {metric}")
    body = text[start:].rstrip("\n").split("\n")
    last = next(i for i in range(len(body) - 1, -1, -1) if body[i].startswith("| GPU reserved segments"))
    body[last] = body[last][: body[last].index("|", body[last].index("|", 2) + 1) + 8]
    return "\n".join(body[: last + 1]) + "\n"


@pytest.mark.parametrize("new_units", [False, True], ids=["KB-MB", "KiB-MiB"])
def test_a_summary_pasted_from_its_reserved_row_gives_the_current_figures(new_units):
    result = _read(_from(_summary(STATS, new_units), "GPU reserved memory"))
    row = result.tables["allocator"].iloc[0]
    assert row["reserved_bytes"] == 8184 * MIB
    assert row["inactive_split_bytes"] == 202300 * 1024  # "202300 KB": below 768 MB, in KB
    assert "allocated_bytes" not in row.index or row.isna()["allocated_bytes"]
    assert any("without its header" in w for w in result.warnings)


def test_two_summaries_without_headers_are_two_rows_and_requested_memory_is_no_column():
    one = _from(_summary(STATS, True), "Active memory")
    later = {**STATS, "Active memory": (7000 * MIB, 7100 * MIB, 21000 * MIB, 14000 * MIB)}
    rows = _read(one + _from(_summary(later, True), "Active memory")).tables["allocator"]
    assert rows["active_bytes"].tolist() == [6000 * MIB, 7000 * MIB]
    assert rows["reserved_bytes"].tolist() == [8184 * MIB, 8184 * MIB]
    assert "requested_bytes" not in rows.columns


def test_a_table_with_one_of_the_summarys_row_names_is_not_a_summary():
    look_alike = (
        "| Setting               | Before     | After      |\n"
        "| Allocated memory      |   5624 MiB |   4096 MiB |\n"
        "| Batch size            |     32     |     16     |\n"
    )
    importer = recognise(mend(look_alike).text)
    assert importer is None or importer.name != "pytorch-memory"


@pytest.mark.skipif(not MEMSUM_B.is_dir(), reason="../shared/data/real-samples is not here")
def test_the_field_paste_that_starts_mid_table_is_read():
    path = MEMSUM_B / "02_torch_summary_midtable_nonreleasable_KB_MB_allocs.txt"
    row = _read(path.read_text()).tables["allocator"].iloc[0]
    assert (row["reserved_bytes"], row["inactive_split_bytes"]) == (8184 * MIB, 202300 * 1024)
