"""The testbed service's settings and the command line that sets them: its faults and its pace."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Settings:
    log: Path
    max_batch: int = 1
    batch_window_ms: float = 0.0
    slow_tokenizer: bool = False
    tokenize_on_loop: bool = False  # the async-server mistake: tokenize in the handler, on the event loop
    profile: bool = False
    device: str = "cpu"
    decomposed_graph: bool = False
    graph_optimizations: str = "all"
    ort_profile: Path | None = None
    model_workers: int = 1  # forwards run at once, each on a session of its own
    intra_op_threads: int = 1  # each session's thread pool
    memory_cleanup: str = "off"  # off | per-request (the pseudo-optimisation) | on-demand
    # Times a prompt is tokenized, as a service does that tokenizes to check the length, applies a chat
    # template and tokenizes again for the model: the weight of the pre-processing
    tokenize_passes: int = 1
    # Each model call sleeps this long instead of computing: a service whose capacity is known by its
    # configuration (model workers x max batch / step), for judging a capacity measurement against it.
    step_ms: float = 0.0
    leak_kb: int = 0  # fault: kilobytes each request leaves behind, never freed (a cache without a bound)
    # The first request's start-up (tokenizer and models made) lasts at least this long, as a real
    # model's weights take seconds to minutes to load where the testbed's tiny one takes about one.
    load_s: float = 0.0


def parse(argv: list[str] | None, description: str) -> tuple[Settings, int]:
    """The settings and the port ``python -m testbed.service`` was started with."""
    parser = argparse.ArgumentParser(prog="python -m testbed.service", description=description)
    parser.add_argument("--port", type=int, default=8700)
    parser.add_argument("--log", type=Path, required=True, help="the request log (JSON lines) to append to")
    parser.add_argument("--max-batch", type=int, default=1, help="requests per model call (1: no batcher)")
    parser.add_argument("--batch-window-ms", type=float, default=0.0, help="how long a batch waits to fill")
    parser.add_argument("--slow-tokenizer", action="store_true", help="fault: the pure-Python tokenizer path")
    parser.add_argument(
        "--tokenize-on-loop",
        action="store_true",
        help="fault: tokenize in the request handler, on the event loop (with --slow-tokenizer: slowly)",
    )
    parser.add_argument(
        "--tokenize-passes",
        type=int,
        default=1,
        help="times each prompt is tokenized (a length check, a chat template, then the model's input)",
    )
    parser.add_argument("--profile", action="store_true", help="fault: a deterministic profiler left on")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument(
        "--decomposed-graph",
        action="store_true",
        help="the model's LayerNorms and GELU written out in elementwise operators (as old exporters do)",
    )
    parser.add_argument(
        "--graph-optimizations",
        choices=("all", "off"),
        default="all",
        help="onnxruntime's graph optimisations (off: fault, every node runs as written, nothing fused)",
    )
    parser.add_argument(
        "--ort-profile", type=Path, help="write an onnxruntime profile of the model here at start-up"
    )
    parser.add_argument(
        "--model-workers", type=int, default=1, help="forwards run at once, each on a session of its own"
    )
    parser.add_argument(
        "--intra-op-threads",
        type=_threads,
        default=1,
        help="each session's thread pool: a number, or Nx for N per core this process may use "
        "(fault: pools multiplied by workers past the cores)",
    )
    parser.add_argument(
        "--memory-cleanup",
        choices=("off", "per-request", "on-demand"),
        default="off",
        help="per-request: fault, memory tidied after every forward; on-demand: only when "
        "POST /admin/release_memory asks",
    )
    parser.add_argument(
        "--step-ms",
        type=float,
        default=0.0,
        help="each model call sleeps this long instead of computing: capacity model workers x max batch / "
        "step, known by configuration",
    )
    parser.add_argument(
        "--leak-kb", type=int, default=0, help="fault: kilobytes each request leaves behind, never freed"
    )
    parser.add_argument(
        "--load-s",
        type=float,
        default=0.0,
        help="the lazy start-up (made by the first request) lasts at least this long, as loading a real "
        "model's weights does",
    )
    args = parser.parse_args(argv)
    settings = Settings(
        args.log,
        args.max_batch,
        args.batch_window_ms,
        args.slow_tokenizer,
        args.tokenize_on_loop,
        args.profile,
        args.device,
        args.decomposed_graph,
        args.graph_optimizations,
        args.ort_profile,
        args.model_workers,
        args.intra_op_threads,
        args.memory_cleanup,
        max(1, args.tokenize_passes),
        args.step_ms,
        args.leak_kb,
        max(0.0, args.load_s),
    )
    return settings, args.port


def _threads(text: str) -> int:
    """A thread count, or ``Nx``: N per core this process may use (at least one)."""
    if text.endswith("x"):
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        return max(1, round(float(text[:-1]) * cores))
    return max(1, int(text))
