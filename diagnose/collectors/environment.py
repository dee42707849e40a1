"""What a recording says of its environment, so that two recordings can be compared fairly.

Written once into the manifest's ``environment`` map: the interpreter and the
machine, the versions of the serving stack's packages where this Python can
see them (read from their metadata: nothing is imported), the NVIDIA driver
and CUDA versions where NVML answers, each watched server's command line (its
secrets masked) and the thread-pool sizes its environment sets (a fixed list
of variable names, nothing else of its environment is read into the dump),
and whatever the user gave with ``--env NAME=VALUE``.
"""

from __future__ import annotations

import platform
from importlib import metadata

import psutil

from diagnose.collectors.redact import redact_cmdline

# The serving stack, by distribution name: engines, runtimes and the frameworks under them.
PACKAGES = (
    "torch",
    "vllm",
    "sglang",
    "text-generation-server",
    "tensorrt",
    "tensorrt-llm",
    "onnxruntime",
    "onnxruntime-gpu",
    "transformers",
    "tritonclient",
    "jax",
    "tensorflow",
    "triton",
    "flash-attn",
    "xformers",
)


# The variables that size a serving process's thread pools: the only ones read from its environment.
THREAD_SETTINGS = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS",
    "RAYON_NUM_THREADS",
    "TOKENIZERS_PARALLELISM",
    "OMP_WAIT_POLICY",
    "WEB_CONCURRENCY",
)


def describe_environment(
    server_pids: list[int], driver: dict[str, str] | None = None, given: dict[str, str] | None = None
) -> dict[str, str]:
    found = {
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "cpu_model": platform.processor() or platform.machine(),
    }
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    found.update(driver or {})
    for index, pid in enumerate(server_pids):
        try:
            cmdline = " ".join(psutil.Process(pid).cmdline())
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        found["server_cmdline" if index == 0 else f"server_cmdline_{pid}"] = redact_cmdline(cmdline)
        for name, value in thread_settings(pid).items():
            found[name if index == 0 else f"{name}_{pid}"] = value
    found.update(given or {})
    return found


def thread_settings(pid: int) -> dict[str, str]:
    """The process's thread-pool variables (THREAD_SETTINGS) that it sets; {} where its environment
    cannot be read (another user's process)."""
    try:
        environ = psutil.Process(pid).environ()
    except (psutil.Error, OSError):
        return {}
    return {name: environ[name][:32] for name in THREAD_SETTINGS if name in environ}
