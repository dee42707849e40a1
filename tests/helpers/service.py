"""The loopback test service (fake_service.py) as a pytest fixture, and a bounded wait."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

SERVICE = Path(__file__).with_name("fake_service.py")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def answers(url: str) -> bool:
    """Whether a GET of ``url`` answers 2xx now (a service still starting does not)."""
    try:
        urllib.request.urlopen(url, timeout=0.5).read()
        return True
    except OSError:
        return False


def wait_for(condition, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError("timed out waiting")


@pytest.fixture
def service(tmp_path):
    """(base URL, request log path) of a running fake service; stopped after the test."""
    port, log = free_port(), tmp_path / "requests.jsonl"
    process = subprocess.Popen([sys.executable, str(SERVICE), str(port), str(log)])
    url = f"http://127.0.0.1:{port}"
    wait_for(lambda: answers(f"{url}/metrics"))
    yield url, log
    process.terminate()
    process.wait(timeout=10)
