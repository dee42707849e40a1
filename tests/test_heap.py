"""The malloc tuning of the analysis commands takes effect on glibc and is harmless elsewhere."""

from __future__ import annotations

import platform
import subprocess
import sys


def test_freed_memory_is_kept_on_glibc_and_the_call_never_fails():
    code = "from diagnose.heap import reuse_freed_memory as r; print(r(), r())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    first, again = done.stdout.split()
    assert first == again  # once per process, the same answer
    if sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc":
        assert first == "True"
