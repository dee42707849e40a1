"""Pictures for the incident review, beside the Markdown report (``review.assets/*.png``).

Each picture is made from the analysis in two steps: its data (a frozen
dataclass the tests check against the facts) and its drawing (matplotlib,
imported only here and only when pictures are asked for).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diagnose.detect import SpikeAnalysis
from diagnose.dump.model import Dump
from diagnose.pictures import evidence, trace
from diagnose.pictures.stages import draw_stages, stage_data
from diagnose.pictures.timeline import draw_timeline, timeline_data
from diagnose.report.model import Report
from diagnose.units import counted


@dataclass(frozen=True)
class Picture:
    title: str
    path: Path  # where it was written
    alt: str  # what it shows, for a reader who cannot see it
    data: object = None  # the dataclass it was drawn from: what tests and the gallery check


def beside(output: Path, draw: Callable[[Path], list[Picture]]) -> tuple[Path, list[tuple[str, str, str]]]:
    """Pictures for a Markdown file: drawn into ``review.assets/`` beside ``review.md``, linked relatively.

    Returns the folder and (title, relative link, alt) per picture.
    """
    folder = output.parent / f"{output.stem}.assets"
    existed = folder.exists()
    pictures = draw(folder)
    if not pictures and not existed and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()  # nothing to draw (a dump without latencies): no empty folder left beside the report
    return folder, [(p.title, f"{folder.name}/{p.path.name}", p.alt) for p in pictures]


def in_memory(draw: Callable[[Path], list[Picture]]) -> list[tuple[str, bytes, str]]:
    """Pictures for a self-contained page: drawn in a scratch folder, kept as (title, PNG bytes, alt)."""
    with tempfile.TemporaryDirectory(prefix="diagnose-pictures-") as scratch:
        return [(p.title, p.path.read_bytes(), p.alt) for p in draw(Path(scratch))]


def render_pictures(report: Report, spikes: SpikeAnalysis, dump: Dump, folder: Path) -> list[Picture]:
    """Draw every picture the analysis has data for into ``folder``; return them in report order."""
    from diagnose.pictures import style

    folder.mkdir(parents=True, exist_ok=True)
    pictures = []
    timeline = timeline_data(report, spikes, dump)
    if timeline is not None:
        path = folder / "timeline.png"
        style.save(draw_timeline(timeline), path)
        related = ", ".join(track.words for track in timeline.related) or "no other signal"
        pictures.append(
            Picture(
                "Timeline",
                path,
                f"latency P50 and P99 over time, {counted(len(timeline.episodes), 'spike episode')} shaded; "
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
    pictures = _named_as_evidence(pictures, report)
    return pictures + _evidence_pictures(report, dump, folder)


# Findings whose evidence is the timeline (something in time lines up with the spikes) or the
# stage breakdown (a stage's share is the finding); the others have a picture of their own below.
SHOWN_BY_TIMELINE = frozenset(
    {
        "co-located-contention",
        "profiler-overhead",
        "engine-stall",
    }
)
SHOWN_BY_STAGES = frozenset({"cpu-bound-stage", "compute-bound-forward"})


def _named_as_evidence(pictures: list[Picture], report: Report) -> list[Picture]:
    """The timeline and the stage breakdown say which fired findings they are the evidence of."""
    fired = [h.id for h in report.hypotheses]
    named = []
    for picture in pictures:
        shown = SHOWN_BY_TIMELINE if picture.path.name == "timeline.png" else SHOWN_BY_STAGES
        ids = [rule_id for rule_id in fired if rule_id in shown]
        title = f"{picture.title}: the evidence of {', '.join(ids)}" if ids else picture.title
        named.append(Picture(title, picture.path, picture.alt, picture.data))
    return named


@dataclass(frozen=True)
class EvidencePicture:
    """A finding's picture of its own: drawn from its data, named in the report beside the finding."""

    name: str  # the file's name, without .png; findings that share a picture share it
    data: Callable[[Dump, Report], Any]  # its data from the dump and the report; None: nothing to draw
    draw: Callable[[Any], Any]  # the data -> a matplotlib figure
    alt: str  # what it shows, for a reader who cannot see it


# Each finding with a picture of its own, by rule id.
EVIDENCE: dict[str, EvidencePicture] = {
    "memory-fragmentation": EvidencePicture(
        "memory",
        lambda dump, report: evidence.memory_data(dump),
        evidence.draw_memory,
        "GPU memory with the allocator's reserved and allocated bytes, OOMs marked",
    ),
    "cold-start-contamination": EvidencePicture(
        "cold-start",
        lambda dump, report: evidence.coldstart_data(dump),
        evidence.draw_coldstart,
        "latency against the time since each start, the cold requests marked",
    ),
    "batch-window-too-long": EvidencePicture(
        "batch-curve",
        evidence.batch_curve,
        evidence.draw_batch_curve,
        "throughput and forward time against batch size",
    ),
    "oversized-batch": EvidencePicture(
        "batch-curve",
        evidence.batch_curve,
        evidence.draw_batch_curve,
        "throughput and forward time against batch size",
    ),
    "input-length-shift": EvidencePicture(
        "length-shift",
        evidence.shift_model,
        evidence.draw_shift,
        "each request's served time against its input length before and after the shift, with the line "
        "fitted before it",
    ),
    "gpu-throttling": EvidencePicture(
        "clocks",
        lambda dump, report: evidence.clock_data(dump, report.name("gpu.throttle_gpu")),
        evidence.draw_clocks,
        "the SM clock share of its maximum and the temperature while the most throttled GPU worked, its "
        "throttled seconds shaded, and the forward time on the same axis",
    ),
    "kv-cache-pressure": EvidencePicture(
        "engine",
        lambda dump, report: evidence.engine_panel(dump),
        evidence.draw_panel,
        "KV cache usage, preemptions, and requests running and waiting over time",
    ),
    "memory-swapping": EvidencePicture(
        "swap",
        lambda dump, report: evidence.swap_panel(dump),
        evidence.draw_panel,
        "swap used and swapped bytes per second over time",
    ),
    "prefill-decode-interference": EvidencePicture(
        "interference",
        lambda dump, report: evidence.interference_data(dump),
        evidence.draw_interference,
        "in the minute with the most interfered requests, each generating request from its first to its "
        "last token at its time per output token, with the long prompts' prefills; beside it, TPOT relative "
        "to its minute during a long prefill and clear of one",
    ),
    "coarse-sampling": EvidencePicture(
        "sampling",
        lambda dump, report: evidence.sampling_data(dump),
        evidence.draw_sampling,
        "the sample instants of each time series over a stretch of the dump, with a 15 s spike to scale",
    ),
    # The three findings a profiler trace makes share one picture: the GPU's time and the top kernels.
    **{
        rule_id: EvidencePicture(
            "gpu-trace",
            lambda dump, report: trace.trace_strip(dump),
            trace.draw_trace,
            "the profiled span in slices, each the share a kernel ran and the share the GPU idled with its "
            "next kernel already queued, or with the host launching, in runtime calls, in operators, on "
            "CPU work, blocked or in nothing traced; then the same a whole step each; below, the kernels "
            "with the most time",
        )
        for rule_id in (
            "unfused-operators",
            "host-sync-in-step",
            "pageable-host-copies",
            "gpu-waits-on-dependency",
        )
    },
    "over-parallelism": EvidencePicture(
        "cpu",
        lambda dump, report: evidence.cpu_panel(dump),
        evidence.draw_panel,
        "the host's run queue against its cores, the server's context switches (preempted and blocked of "
        "their own accord) and its threads waiting for a core, over time",
    ),
    "memory-cleanup-per-request": EvidencePicture(
        "memory-taken-afresh",
        lambda dump, report: evidence.cleanup_panel(dump),
        evidence.draw_panel,
        "the allocator's cudaMalloc calls and the requests a second, the server's page faults a second and "
        "its resident memory, over time",
    ),
    "queue-saturation": EvidencePicture(
        "queueing-curve",
        evidence.queue_curve,
        evidence.draw_queue_curve,
        "each window's queue wait against its arrival rate and utilisation, with the rho/(1-rho) fit",
    ),
}


def _evidence_pictures(report: Report, dump: Dump, folder: Path) -> list[Picture]:
    """The picture of each fired hypothesis's evidence, strongest hypothesis first, each drawn once; a
    consequence of another finding (judge/engine.py) is shown under its cause, in words only."""
    from diagnose.pictures import style

    pictures, drawn = [], set()
    for hypothesis in report.hypotheses:
        if hypothesis.id not in EVIDENCE or hypothesis.is_consequence:
            continue
        picture = EVIDENCE[hypothesis.id]
        if picture.name in drawn or (data := picture.data(dump, report)) is None:
            continue
        path = folder / f"{picture.name}.png"
        style.save(picture.draw(data), path)
        drawn.add(picture.name)
        pictures.append(Picture(f"Evidence: {hypothesis.id}", path, picture.alt, data))
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
