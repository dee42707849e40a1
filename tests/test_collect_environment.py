"""The recorder keeps what a fair comparison needs (versions, the server's command line) and no secret."""

from __future__ import annotations

import os
import platform

import pytest

from diagnose.collectors.environment import describe_environment
from diagnose.collectors.redact import redact_cmdline


@pytest.mark.parametrize(
    ("cmdline", "redacted"),
    [
        ("vllm serve m --api-key sk-123 --port 8000", "vllm serve m --api-key *** --port 8000"),
        ("HF_TOKEN=hf_abc python serve.py --hf-token=hf_x", "HF_TOKEN=*** python serve.py --hf-token=***"),
        ("job --db postgres://admin:hunter2@db:5432/x", "job --db postgres://admin:***@db:5432/x"),
        (
            "x --secret s3 --DB_PASSWORD=x --auth-header Bearer",
            "x --secret *** --DB_PASSWORD=*** --auth-header ***",
        ),
    ],
)
def test_secrets_on_a_command_line_are_masked(cmdline, redacted):
    assert redact_cmdline(cmdline) == redacted


@pytest.mark.parametrize(
    "cmdline",
    [
        "python -m server --port 8000",
        "vllm serve m --max-num-batched-tokens 8192 --tokenizer-mode auto --max-tokens 100",
        "python train.py --password",  # nothing follows: nothing to mask
    ],
)
def test_settings_that_merely_mention_tokens_are_kept(cmdline):
    assert redact_cmdline(cmdline) == cmdline


def test_the_environment_names_python_the_driver_the_server_and_what_the_user_gave():
    found = describe_environment(
        [os.getpid()], driver={"driver_version": "550.54.15"}, given={"model": "llama-3-8b-int8"}
    )
    assert found["python"] == platform.python_version()
    assert found["driver_version"] == "550.54.15"
    assert found["model"] == "llama-3-8b-int8"
    assert "python" in found["server_cmdline"] or "pytest" in found["server_cmdline"]


def test_a_server_that_is_gone_is_left_out():
    found = describe_environment([2**22 + 12345])
    assert not any(key.startswith("server_cmdline") for key in found)


def test_a_server_thread_pool_settings_are_kept_and_nothing_else_of_its_environment():
    """A child with a pool size and a secret in its environment: the size is kept, the secret is not."""
    import subprocess
    import sys
    import time

    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)"],
        env={
            **os.environ,
            "OMP_NUM_THREADS": "8",
            "HF_TOKEN": "hf_secret",
            "PATH": os.environ.get("PATH", ""),
        },
    )
    try:
        time.sleep(0.2)
        found = describe_environment([child.pid])
    finally:
        child.kill()
        child.wait()
    assert found["OMP_NUM_THREADS"] == "8"
    assert "hf_secret" not in repr(found) and "HF_TOKEN" not in found
