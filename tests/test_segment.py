"""The l2 search: ruptures' compiled kernel, loaded directly, answers as the public KernelCPD does."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from diagnose.detect import segment


def _signals():
    rng = np.random.default_rng(7)
    for size in (6, 12, 40, 300):
        levels = np.repeat(rng.normal(0, 3, 4), -(-size // 4))[:size]
        yield levels + rng.normal(0, 1, size)
        yield rng.normal(0, 1, size)  # no change
    yield np.zeros(50)  # flat: every split costs the same


@pytest.mark.parametrize("min_size", [2, 3, 5])
@pytest.mark.parametrize("penalty", [1.0, 8.0, 40.0])
def test_the_compiled_kernel_agrees_with_kernelcpd(min_size, penalty):
    kernel = segment._compiled_kernel()
    assert kernel is not None, "ruptures' ekcpd module was not found where ruptures 1.1 keeps it"
    for signal in _signals():
        if signal.size < 2 * min_size:
            continue
        assert segment._kernel_search(kernel, signal, min_size, penalty) == segment._public_search(
            signal, min_size, penalty
        )


def test_a_signal_too_short_for_two_segments_has_no_change():
    assert segment.breakpoints(np.array([0.0, 5.0, 5.0]), 2, 1.0) == [3]


def test_a_read_only_view_is_searched():
    signal = np.r_[np.zeros(20), np.full(20, 10.0)]
    signal.flags.writeable = False
    assert segment.breakpoints(signal, 3, 5.0) == [20, 40]


def test_searching_does_not_import_scipy():
    """The point of loading the kernel directly: scipy.stats costs most of a second to import."""
    code = (
        "import sys, numpy as np\n"
        "from diagnose.detect.segment import breakpoints\n"
        "breakpoints(np.r_[np.zeros(20), np.ones(20)], 3, 1.0)\n"
        "print(sorted(m for m in sys.modules if m.startswith(('scipy', 'ruptures'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "scipy" not in out
    assert "ruptures.detection._detection.ekcpd" in out
