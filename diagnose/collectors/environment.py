"""What a recording says of its environment, so that two recordings can be compared fairly.

Written once into the manifest's ``environment`` map: the interpreter and the
machine, the versions of the serving stack's packages where this Python can
see them (read from their metadata: nothing is imported), the NVIDIA driver
and CUDA versions where NVML answers, each watched server's command line (its
secrets masked), and whatever the user gave with ``--env NAME=VALUE``.
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
    found.update(given or {})
    return found
