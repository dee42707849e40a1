"""diagnose's processes keep to one BLAS thread and no huge pages, unless the user set otherwise."""

from __future__ import annotations

import os
import subprocess
import sys

import diagnose.cli as cli
from diagnose.processes.environment import child_environment, worker_environment

_SETTINGS = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMPY_MADVISE_HUGEPAGE", "ARROW_DEFAULT_MEMORY_POOL")


def test_the_settings_where_the_environment_says_nothing():
    assert worker_environment({"PATH": "/bin"}) == {
        "PATH": "/bin",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "NUMPY_MADVISE_HUGEPAGE": "0",
        "ARROW_DEFAULT_MEMORY_POOL": "system",
    }


def test_the_users_own_setting_wins():
    chosen = {
        "OPENBLAS_NUM_THREADS": "4",
        "NUMPY_MADVISE_HUGEPAGE": "1",
        "ARROW_DEFAULT_MEMORY_POOL": "jemalloc",
    }
    assert worker_environment(chosen).items() >= chosen.items()


def _environment_without_settings() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in _SETTINGS}


def test_the_processes_diagnose_starts_get_the_settings():
    environment = child_environment(_environment_without_settings())
    assert environment["OPENBLAS_NUM_THREADS"] == "1"
    assert environment["NUMPY_MADVISE_HUGEPAGE"] == "0"


def test_the_cli_sets_them_for_itself_and_its_children(monkeypatch, capsys):
    # A copy of the environment stands in for the process's, so that nothing leaks into other tests.
    monkeypatch.setattr(os, "environ", {**_environment_without_settings(), "MKL_NUM_THREADS": "2"})
    assert cli.main(["rules", "list"]) == 0
    assert os.environ["OPENBLAS_NUM_THREADS"] == "1"
    assert os.environ["MKL_NUM_THREADS"] == "2"
    assert os.environ["ARROW_DEFAULT_MEMORY_POOL"] == "system"


def test_numpy_and_pyarrow_read_them_in_a_fresh_process():
    # What the settings are for: the libraries must see them, which they do only if set before import.
    probe = (
        "import os; from diagnose.processes.environment import use_worker_environment; use_worker_environment(); "
        "import numpy, pyarrow; "
        "huge = getattr(numpy._core.multiarray, '_get_madvise_hugepage', None); "
        "print(huge() if huge else 'unknown', pyarrow.default_memory_pool().backend_name)"
    )
    found = subprocess.run(
        [sys.executable, "-c", probe],
        env=_environment_without_settings(),
        capture_output=True,
        text=True,
        check=True,
    )
    huge_pages, pool = found.stdout.split()
    assert pool == "system"
    assert huge_pages in ("False", "unknown")  # numpy's own switch is private: asked where it exists
