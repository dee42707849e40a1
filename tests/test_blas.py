"""diagnose's processes each keep to one BLAS thread, unless the user set a number."""

from __future__ import annotations

import os

import diagnose.cli as cli
from diagnose.blas import one_thread_environment
from diagnose.children import child_environment


def test_one_thread_where_the_environment_says_nothing():
    assert one_thread_environment({"PATH": "/bin"}) == {
        "PATH": "/bin",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


def test_the_users_own_setting_wins():
    assert one_thread_environment({"OPENBLAS_NUM_THREADS": "4"})["OPENBLAS_NUM_THREADS"] == "4"


def _environment_without_blas_settings() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}


def test_the_processes_diagnose_starts_get_one_thread():
    assert child_environment(_environment_without_blas_settings())["OPENBLAS_NUM_THREADS"] == "1"


def test_the_cli_sets_one_thread_for_itself_and_its_children(monkeypatch, capsys):
    # A copy of the environment stands in for the process's, so that nothing leaks into other tests.
    monkeypatch.setattr(os, "environ", {**_environment_without_blas_settings(), "MKL_NUM_THREADS": "2"})
    assert cli.main(["rules", "list"]) == 0
    assert os.environ["OPENBLAS_NUM_THREADS"] == "1"
    assert os.environ["MKL_NUM_THREADS"] == "2"
