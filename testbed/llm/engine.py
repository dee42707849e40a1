"""llama.cpp's HTTP server, built from the package registry's sources, and the tiny model it serves.

The ``llama-cpp-python`` source distribution vendors llama.cpp whole
(``vendor/llama.cpp``, the server in ``tools/server/``). The first use
downloads it with pip, configures it for the CPU with cmake, and builds the
``llama-server`` target; later uses find the binary in the cache
(``$DIAGNOSE_TESTBED_CACHE``, default ``~/.cache/diagnose-testbed``). The build
is configured as ``../shared/notes/llama-cpp-on-cpu.md`` found it must be: no
web UI to download, no tests or examples, and cmake pointed at the real path of
the tree (through a symlink, Ninja loops on the sources' ``.git`` data).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from testbed.llm.tiny_model import write_model

LLAMA_CPP_PYTHON = "0.3.36"  # its vendored llama.cpp reports 0.5.0-dev
_CMAKE_OPTIONS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_BUILD_UI=OFF",
)


class EngineUnavailable(Exception):
    """The engine cannot be built or found here: said in one line, and the tests that need it skip."""


@dataclass(frozen=True)
class Engine:
    server: Path  # the llama-server binary (its shared libraries beside it)
    version: str  # the llama-cpp-python release whose sources built it
    build_seconds: float | None  # how long its build took, where this cache built it


def cache_root() -> Path:
    # The real path: cmake and Ninja must not see the tree through a symlink.
    return Path(os.environ.get("DIAGNOSE_TESTBED_CACHE", "~/.cache/diagnose-testbed")).expanduser().resolve()


def _home(version: str = LLAMA_CPP_PYTHON) -> Path:
    return cache_root() / f"llama.cpp-{version}"


def find() -> Engine | None:
    """The engine this cache already built, or None."""
    home = _home()
    server = home / "build" / "bin" / "llama-server"
    if not os.access(server, os.X_OK):
        return None
    info = home / "build-info.json"
    seconds = json.loads(info.read_text())["build_seconds"] if info.is_file() else None
    return Engine(server, LLAMA_CPP_PYTHON, seconds)


def why_not_buildable() -> str | None:
    """Why this machine cannot build the engine (a missing tool), or None."""
    for tool in ("cmake", "c++", "cc"):
        if shutil.which(tool) is None:
            return f"building llama.cpp's server needs {tool}, which is not on PATH"
    if sys.platform != "linux":
        return f"the testbed builds llama.cpp's server on Linux only (this is {sys.platform})"
    return None


def ensure(say: Callable[[str], None] = print) -> Engine:
    """The engine, built first if this cache has none (minutes: see the README). Raises
    EngineUnavailable with the reason in one line where it cannot be built."""
    found = find()
    if found is not None:
        return found
    if (reason := why_not_buildable()) is not None:
        raise EngineUnavailable(reason)
    home = _home()
    home.mkdir(parents=True, exist_ok=True)
    log = home / "build.log"
    started = time.monotonic()
    source = _sources(home, log, say)
    build = home / "build"
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    jobs = str(max(1, os.cpu_count() or 1))
    say(f"testbed: building llama.cpp's server with {jobs} jobs (a few minutes; the log: {log})")
    _step(["cmake", "-S", str(source), "-B", str(build), *generator, *_CMAKE_OPTIONS], log, "configuring")
    _step(["cmake", "--build", str(build), "--target", "llama-server", "-j", jobs], log, "building")
    seconds = round(time.monotonic() - started, 1)
    (home / "build-info.json").write_text(json.dumps({"build_seconds": seconds, "jobs": int(jobs)}))
    found = find()
    if found is None:
        raise EngineUnavailable(f"the build finished but left no {build / 'bin' / 'llama-server'}; see {log}")
    say(f"testbed: built {found.server} in {seconds:.0f} s")
    return found


def _sources(home: Path, log: Path, say: Callable[[str], None]) -> Path:
    """The vendored llama.cpp tree, downloaded and unpacked once."""
    tree = home / "src" / "vendor" / "llama.cpp"
    if (tree / "CMakeLists.txt").is_file():
        return tree
    archive = home / f"llama_cpp_python-{LLAMA_CPP_PYTHON}.tar.gz"
    if not archive.is_file():
        say(f"testbed: downloading llama-cpp-python {LLAMA_CPP_PYTHON}'s sources (76 MB) from the registry")
        _step(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
             f"llama-cpp-python=={LLAMA_CPP_PYTHON}", "-d", str(home)],
            log, "downloading llama-cpp-python's sources",
        )  # fmt: skip
    unpacked = home / "unpacked"
    shutil.rmtree(unpacked, ignore_errors=True)
    with tarfile.open(archive) as tar:
        tar.extractall(unpacked, filter="data")
    top = next(unpacked.iterdir())
    shutil.rmtree(home / "src", ignore_errors=True)
    top.rename(home / "src")
    unpacked.rmdir()
    return tree


def _step(command: list[str], log: Path, what: str) -> None:
    with log.open("a") as sink:
        sink.write(f"$ {' '.join(command)}\n")
        sink.flush()
        done = subprocess.run(command, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise EngineUnavailable(f"{what} failed (exit {done.returncode}); see {log}")


def model(words: list[str], seed: int = 0) -> Path:
    """The tiny model for ``seed``, written once into the cache."""
    path = cache_root() / "models" / f"tiny-llama-seed{seed}.gguf"
    if not path.is_file():
        write_model(path, words, seed)
    return path
