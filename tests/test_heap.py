"""The malloc tuning of the analysis commands takes effect on glibc and is harmless elsewhere."""

from __future__ import annotations

import platform
import subprocess
import sys


def test_freed_memory_is_kept_on_glibc_and_the_call_never_fails():
    code = "from diagnose.processes.heap import reuse_freed_memory as r; print(r(), r())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    first, again = done.stdout.split()
    assert first == again  # once per process, the same answer
    if sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc":
        assert first == "True"


def test_the_command_leaves_what_is_alive_to_the_exit_not_to_another_collection():
    code = (
        "import gc, sys; from diagnose import cli; sys.argv = ['diagnose', 'rules', 'list']; "
        "code = cli.run(); print(code, gc.get_freeze_count() > 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split()[-2:] == ["0", "True"]
