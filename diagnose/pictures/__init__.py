"""Pictures for the incident review, beside the Markdown report (``review.assets/*.png``).

Each picture is made from the analysis in two steps: its data (a frozen
dataclass the tests check against the facts) and its drawing (matplotlib,
imported only here and only when pictures are asked for).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from diagnose.detect import SpikeAnalysis
from diagnose.dump.model import Dump
from diagnose.pictures.stages import draw_stages, stage_data
from diagnose.pictures.timeline import draw_timeline, timeline_data


@dataclass(frozen=True)
class Picture:
    title: str
    path: Path  # where it was written
    alt: str  # what it shows, for a reader who cannot see it
    data: object = None  # the dataclass it was drawn from: what tests and the gallery check


def render_pictures(report: dict, spikes: SpikeAnalysis, dump: Dump, folder: Path) -> list[Picture]:
    """Draw every picture the analysis has data for into ``folder``; return them in report order."""
    from diagnose.pictures import style

    folder.mkdir(parents=True, exist_ok=True)
    pictures = []
    timeline = timeline_data(report, spikes, dump)
    if timeline is not None:
        path = folder / "timeline.png"
        style.save(draw_timeline(timeline), path)
        related = ", ".join(track.name for track in timeline.related) or "no aligned signal"
        pictures.append(
            Picture(
                "Timeline",
                path,
                f"latency P50 and P99 over time, {len(timeline.episodes)} spike episodes shaded; "
                f"below: {related}",
                timeline,
            )
        )
    stages = stage_data(report)
    if stages is not None:
        path = folder / "stages.png"
        style.save(draw_stages(stages), path)
        pictures.append(
            Picture(
                "Stage breakdown",
                path,
                "each stage's share of the mean latency and of the P99 requests",
                stages,
            )
        )
    return pictures + _evidence_pictures(report, dump, folder)


def _evidence_pictures(report: dict, dump: Dump, folder: Path) -> list[Picture]:
    """The picture of each fired hypothesis's evidence, strongest hypothesis first, each drawn once."""
    from diagnose.pictures import evidence, style

    kinds = {
        "memory-fragmentation": (
            "memory",
            lambda: evidence.memory_data(dump),
            evidence.draw_memory,
            "GPU memory with the allocator's reserved and allocated bytes, OOMs marked",
        ),
        "cold-start-contamination": (
            "cold-start",
            lambda: evidence.coldstart_data(dump),
            evidence.draw_coldstart,
            "latency against the time since each start, the cold requests marked",
        ),
        "batch-window-too-long": (
            "batch-curve",
            lambda: evidence.batch_curve(dump, report),
            evidence.draw_batch_curve,
            "throughput and forward time against batch size",
        ),
        "input-length-shift": (
            "length-shift",
            lambda: evidence.shift_model(dump),
            evidence.draw_shift,
            "each request's served time against its input length before and after the shift, with the line "
            "fitted before it",
        ),
        "gpu-throttling": (
            "clocks",
            lambda: evidence.clock_data(dump),
            evidence.draw_clocks,
            "the SM clock share of its maximum and the temperature while the GPU worked, throttled seconds "
            "shaded, and the forward time on the same axis",
        ),
        "queue-saturation": (
            "queueing-curve",
            lambda: evidence.queue_curve(dump, report),
            evidence.draw_queue_curve,
            "each window's queue wait against its arrival rate and utilisation, with the rho/(1-rho) fit",
        ),
        "oversized-batch": (
            "batch-curve",
            lambda: evidence.batch_curve(dump, report),
            evidence.draw_batch_curve,
            "throughput and forward time against batch size",
        ),
    }
    pictures, drawn = [], set()
    for hypothesis in report["hypotheses"]:
        if hypothesis["id"] not in kinds:
            continue
        name, data_of, draw, alt = kinds[hypothesis["id"]]
        data = None if name in drawn else data_of()
        if data is None:
            continue
        path = folder / f"{name}.png"
        style.save(draw(data), path)
        drawn.add(name)
        pictures.append(Picture(f"Evidence: {hypothesis['id']}", path, alt, data))
    return pictures


def render_comparison_pictures(comparison, before_latency, after_latency, folder: Path) -> list[Picture]:
    """The latency ECDF before and after, and each stage's change; ``*_latency``: warm requests' latencies."""
    from diagnose.pictures import style
    from diagnose.pictures.compare import draw_ecdf, draw_stage_changes, ecdf_data, stage_changes

    folder.mkdir(parents=True, exist_ok=True)
    pictures = []
    if before_latency is not None and after_latency is not None:
        path = folder / "latency-ecdf.png"
        ecdf = ecdf_data(comparison, before_latency, after_latency)
        style.save(draw_ecdf(ecdf), path)
        pictures.append(
            Picture("Latency before and after", path, "the latency distributions before and after", ecdf)
        )
    stages = stage_changes(comparison)
    if stages is not None:
        path = folder / "stage-changes.png"
        style.save(draw_stage_changes(stages), path)
        pictures.append(
            Picture("Each stage's change", path, "each stage's P50 and P99 change with its interval", stages)
        )
    return pictures


def digest(data: object) -> str:
    """A picture's data as a short hash: the gallery is current when its data is, whoever draws pixels."""
    import dataclasses
    import hashlib

    import numpy as np

    hasher = hashlib.sha256()

    def feed(value: object) -> None:
        if dataclasses.is_dataclass(value):
            for item in dataclasses.fields(value):
                hasher.update(item.name.encode())
                feed(getattr(value, item.name))
        elif isinstance(value, np.ndarray):
            hasher.update(np.round(value.astype("float64"), 6).tobytes())
        elif isinstance(value, tuple | list):
            for item in value:
                feed(item)
        elif isinstance(value, float):
            hasher.update(repr(round(value, 6)).encode())
        else:
            hasher.update(repr(value).encode())

    feed(data)
    return hasher.hexdigest()[:16]
