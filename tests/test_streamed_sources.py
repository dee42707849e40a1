"""A file too large to hold is read in pieces: the same tables as a whole read, in bounded memory.

The pieces are forced small here (a few KiB, where the product uses 8 MiB), so that the real samples
are cut many times and every importer that reads lines is read the streamed way.
"""

from __future__ import annotations

import gzip
import tracemalloc

import pytest

from diagnose.importers import HEAD_BYTES, FileImporter, base, mend, recognise, text_head
from diagnose.importers.base import Source, StreamedSource
from tests.helpers.samples import REAL


def _read(path, streamed: bool, monkeypatch, piece: int = 4096):
    monkeypatch.setattr(base, "STREAM_BYTES", 0 if streamed else 2**40)
    monkeypatch.setattr(base, "PIECE_BYTES", piece)
    head = text_head(path, HEAD_BYTES)
    importer = recognise(mend(head).text) if head is not None else None
    if importer is None or isinstance(importer, FileImporter):
        return None
    source = Source.from_path(path)
    assert isinstance(source, StreamedSource) == streamed
    result = importer.read(source)
    return importer.name, result.tables, result.warnings, source.mended, source.prefixes


@pytest.mark.skipif(not REAL.is_dir(), reason="../shared/data/real-samples is not here")
def test_every_real_sample_reads_the_same_in_pieces_as_whole(monkeypatch):
    samples = sorted(
        path
        for batch in ("formats", "field-2026-12")
        for path in (REAL / batch).rglob("*")
        if path.is_file() and path.name not in ("README.md", "SOURCES.tsv")
    )
    read, different = 0, []
    for sample in samples:
        whole = _read(sample, False, monkeypatch)
        if whole is None:
            continue
        read += 1
        name, tables, warnings, mended, prefixes = _read(sample, True, monkeypatch)
        same = name == whole[0] and tables.keys() == whole[1].keys()
        same = same and all(tables[t].equals(whole[1][t]) for t in tables)
        if not (same and warnings == whole[2] and mended == whole[3] and prefixes == whole[4]):
            different.append(str(sample.relative_to(REAL)))
    assert read > 250 and not different, different


def _vllm_log(lines: int) -> str:
    """A vLLM log: a stats line every 10 s among request lines, every line with a Ray-style tag."""
    out = []
    for i in range(lines):
        stamp = f"05-19 10:{i // 600 % 60:02d}:{i // 10 % 60:02d}"
        if i % 50 == 0:
            out.append(
                f"(VllmWorkerProcess pid=7) INFO {stamp} [loggers.py:271] Engine 000: Avg prompt throughput: "
                f"{i % 97}.0 tokens/s, Avg generation throughput: {i % 89}.5 tokens/s, Running: {i % 13} reqs, "
                f"Waiting: {i % 5} reqs, GPU KV cache usage: {i % 100}.0%, Prefix cache hit rate: 12.5%"
            )
        else:
            out.append(
                f"(VllmWorkerProcess pid=7) INFO {stamp} [logger.py:43] Received request cmpl-{i:08x}: "
                f"prompt: 'tell me about the weather in a city far away', params: SamplingParams(n=1)"
            )
    return "\n".join(out) + "\n"


def test_a_large_log_is_read_in_pieces_with_a_fraction_of_its_size_in_memory(tmp_path, monkeypatch):
    path = tmp_path / "vllm.log"
    path.write_text(_vllm_log(20_000), encoding="utf-8")  # about 3.5 MiB
    size = path.stat().st_size

    def peak(streamed: bool):
        tracemalloc.start()
        try:
            result = _read(path, streamed, monkeypatch, piece=64 * 1024)
            return result, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    (name, tables, _, mended, _), streamed_peak = peak(True)
    whole, whole_peak = peak(False)
    assert name == "vllm-log" and len(tables["server"]) == 400
    assert tables["server"].equals(whole[1]["server"])
    # Read whole, the text is held several times over (bytes, text, mended text, its lines); in pieces,
    # a few pieces' worth and the rows.
    assert whole_peak > size and streamed_peak < size / 4, (size, whole_peak, streamed_peak)
    assert (
        mended
        == whole[3]
        == ('removed a process tag prefix ("(VllmWorkerProcess pid=…)") from 20,000 lines',)
    )


def test_pieces_end_at_line_ends_and_a_gzip_file_streams_too(tmp_path, monkeypatch):
    lines = [f"line {i} " + "é" * (i % 7) for i in range(5000)]  # a character of two bytes near any cut
    path = tmp_path / "log.gz"
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode("utf-8")))
    monkeypatch.setattr(base, "STREAM_BYTES", 0)
    monkeypatch.setattr(base, "PIECE_BYTES", 1000)
    source = Source.from_path(path)
    assert isinstance(source, StreamedSource)
    assert list(source.lines()) == lines
    assert list(source.lines()) == lines  # read again from the start, as an importer's second pass does
