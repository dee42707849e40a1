"""PyTorch OOM messages across wordings, and the classification of each OOM."""

from __future__ import annotations

import pytest

from diagnose.engines.oom import (
    ANOMALOUS,
    EXHAUSTION,
    EXHAUSTION_OTHER_PROCESS,
    EXHAUSTION_REQUEST_TOO_LARGE,
    FRAGMENTATION,
    UNKNOWN,
    classify_oom,
    explain_oom,
    parse_oom_message,
)
from diagnose.importers.oom_log import oom_events
from tests.conftest import SHARED_DATA

MIB, GIB = 2**20, 2**30

OLD = (
    "RuntimeError: CUDA out of memory. Tried to allocate 2.87 GiB (GPU 0; 14.76 GiB total capacity; "
    "8.77 GiB already allocated; 19.75 MiB free; 13.71 GiB reserved in total by PyTorch)"
)
NEW = (
    "ERROR 04-01 23:46:56 [engine.py:160] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
    "546.00 MiB. GPU 3 has a total capacity of 15.77 GiB of which 514.19 MiB is free. Process 562167 has "
    "15.25 GiB memory in use. Of the allocated memory 13.73 GiB is allocated by PyTorch, and 736.86 MiB is "
    "reserved by PyTorch but unallocated."
)


def test_old_wording_derives_stranded_memory_from_reserved_minus_allocated():
    oom = parse_oom_message(OLD)
    assert oom.requested_bytes == pytest.approx(2.87 * GIB)
    assert oom.total_bytes == pytest.approx(14.76 * GIB)
    assert oom.free_bytes == pytest.approx(19.75 * MIB)
    assert oom.reserved_unallocated_bytes == pytest.approx((13.71 - 8.77) * GIB)
    assert classify_oom(oom) == FRAGMENTATION


def test_new_wording_with_log_prefix_reads_every_field():
    oom = parse_oom_message(NEW)
    assert (oom.gpu, oom.pid) == (3, 562167)
    assert oom.requested_bytes == pytest.approx(546 * MIB)
    assert oom.process_in_use_bytes == pytest.approx(15.25 * GIB)
    assert oom.reserved_unallocated_bytes == pytest.approx(736.86 * MIB)
    # 737 MiB stranded covers the 546 MiB request, but is 4.6 % of a card the process fills
    verdict, reason = explain_oom(oom)
    assert verdict == EXHAUSTION and "4.6% of the card" in reason


def test_allocator_warning_in_bytes():
    oom = parse_oom_message(
        "[rank5]:[W CUDACachingAllocator.cpp:3933] memory allocation failed with OOM on device 5\n"
        "  while trying to allocate 671088640 bytes (free: 513736704, total: 85095874560)."
    )
    assert (oom.requested_bytes, oom.free_bytes, oom.total_bytes, oom.gpu) == (
        671088640,
        513736704,
        85095874560,
        5,
    )
    assert classify_oom(oom) == EXHAUSTION


def _new(requested: str, total: str, free: str, in_use: str, stranded: str) -> str:
    return (
        f"CUDA out of memory. Tried to allocate {requested}. GPU 0 has a total capacity of {total} of "
        f"which {free} is free. Including non-PyTorch memory, this process has {in_use} memory in use. "
        f"Of the allocated memory 1.00 GiB is allocated by PyTorch, and {stranded} is reserved by "
        "PyTorch but unallocated."
    )


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        (_new("2.00 GiB", "80.00 GiB", "100.00 MiB", "79.80 GiB", "5.00 GiB"), FRAGMENTATION),
        # the same figures with 3 GiB stranded: 3.75 % of a full card is the allocator's slack
        (_new("2.00 GiB", "80.00 GiB", "100.00 MiB", "79.80 GiB", "3.00 GiB"), EXHAUSTION),
        (_new("90.00 GiB", "80.00 GiB", "100.00 MiB", "79.80 GiB", "1.00 GiB"), EXHAUSTION_REQUEST_TOO_LARGE),
        (_new("2.00 GiB", "80.00 GiB", "100.00 MiB", "30.00 GiB", "10.00 MiB"), EXHAUSTION_OTHER_PROCESS),
        (_new("2.00 GiB", "80.00 GiB", "100.00 MiB", "79.80 GiB", "10.00 MiB"), EXHAUSTION),
        (_new("2.00 GiB", "80.00 GiB", "5.00 GiB", "70.00 GiB", "10.00 MiB"), ANOMALOUS),
        ("torch.OutOfMemoryError: CUDA out of memory.", UNKNOWN),
    ],
)
def test_each_classification_outcome(message, kind):
    assert classify_oom(parse_oom_message(message)) == kind


def test_text_without_an_oom_is_not_parsed():
    assert parse_oom_message("INFO model loaded in 12.3 s, 14.2 GiB") is None
    assert parse_oom_message("INFO allocated the KV cache: 14.2 GiB") is None


@pytest.mark.parametrize(
    "message",
    [
        "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
        "RuntimeError: cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
    ],
)
def test_a_math_library_that_could_not_allocate_is_an_oom_with_no_figures(message):
    """cuBLAS and cuDNN allocate their handles' and workspaces' device memory themselves: their failure to
    is the device out of memory, said without a request size."""
    assert classify_oom(parse_oom_message(message)) == UNKNOWN
    events = oom_events(["Traceback (most recent call last):", message], 1_765_000_000.0)
    assert [e["oom_class"] for e in events] == [UNKNOWN]


SAMPLES = SHARED_DATA / "real-samples" / "formats" / "pytorch_oom"


@pytest.mark.skipif(not SAMPLES.is_dir(), reason="shared real samples are not present")
def test_every_real_oom_sample_yields_its_requested_size():
    for sample in sorted(SAMPLES.glob("*.txt")):
        text = sample.read_text(encoding="utf-8").split("\n", 1)[1]
        oom = parse_oom_message(text)
        assert oom is not None, sample.name
        assert oom.requested_bytes and oom.requested_bytes > 0, sample.name
        if "total capac" in text or "Device limit" in text or "total:" in text:
            assert oom.total_bytes, sample.name
        if not oom.cut:  # a message cut before its reserve may leave nothing to tell
            assert classify_oom(oom) != UNKNOWN, sample.name


def test_a_serving_engine_holding_the_card_is_its_kv_cache_preallocation():
    from diagnose.engines.oom import EXHAUSTION_ENGINE_PREALLOCATED

    oom = parse_oom_message(_new("2.00 GiB", "80.00 GiB", "100.00 MiB", "79.50 GiB", "10.00 MiB"))
    assert classify_oom(oom) == EXHAUSTION
    assert classify_oom(oom, serving_engine=True) == EXHAUSTION_ENGINE_PREALLOCATED


def test_torch_1_0_to_1_3_cached_is_the_reserve_not_yet_allocated():
    from diagnose.engines.oom import FRAGMENTATION, explain_oom, parse_oom_message

    oom = parse_oom_message(
        "RuntimeError: CUDA out of memory. Tried to allocate 1.72 GiB (GPU 0; 10.76 GiB total capacity; "
        "4.01 GiB already allocated; 356.00 MiB free; 5.54 GiB cached)"
    )
    assert oom.reserved_unallocated_bytes == 5.54 * 2**30
    verdict, reason = explain_oom(oom)
    assert verdict == FRAGMENTATION
    assert reason == "reserved but unallocated 5.54 GiB >= requested 1.72 GiB, 51% of the card"


def test_a_message_wrapped_mid_figure_by_the_terminal_keeps_its_reserve(tmp_path):
    from diagnose.importers.oom_log import oom_events

    lines = [
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.11 GiB (GPU 0; 8.00 GiB total "
        "capacity; 19.84 GiB already allocated; 0 bytes free; 22.26 GiB",
        " reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_spl",
        "it_size_mb to avoid fragmentation.",
    ]
    (event,) = oom_events(lines, 0.0)
    assert event["oom_class"] == "fragmentation" and "2.42 GiB >= requested 2.11 GiB" in event["oom_reason"]


@pytest.mark.parametrize(
    "line, backend",
    [
        (
            "RuntimeError: XPU out of memory. Tried to allocate 1.71 GiB (GPU 0; 15.56 GiB total capacity)",
            "xpu",
        ),
        (
            "MPS backend out of memory (MPS allocated: 9.57 GiB). Tried to allocate 292.50 MiB on private pool.",
            "mps",
        ),
        (
            "W bfc_allocator.cc:219] Allocator (GPU_0_bfc) ran out of memory trying to allocate 538.33MiB.",
            "tensorflow",
        ),
        (
            "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 8 bytes.",
            "xla",
        ),
        (
            "XlaRuntimeError: RESOURCE_EXHAUSTED: Failed to allocate request for 2.00GiB (2147483648B) on device 0",
            "xla",
        ),
    ],
)
def test_other_back_ends_are_named_not_read_as_cuda(line, backend):
    from diagnose.engines.oom import OTHER_BACKEND, explain_oom, parse_oom_message

    oom = parse_oom_message(line)
    assert oom is not None and oom.backend == backend
    assert explain_oom(oom)[0] == OTHER_BACKEND


def test_an_error_without_figures_is_an_event_and_prose_that_mentions_one_is_not():
    from diagnose.engines.oom import UNKNOWN
    from diagnose.importers.oom_log import oom_events

    events = oom_events(
        [
            "torch.AcceleratorError: CUDA error: out of memory",
            "I meet CUDA out of memory when I run the test code. But there is no processes on my GPU.",
        ],
        0.0,
    )
    assert [e["oom_class"] for e in events] == [UNKNOWN]


def test_free_memory_a_rounding_away_from_the_request_is_not_anomalous():
    from diagnose.engines.oom import ANOMALOUS, EXHAUSTION, OomMessage, classify_oom

    gib = 2**30
    barely = OomMessage(requested_bytes=8.13 * gib, total_bytes=10.76 * gib, free_bytes=8.20 * gib)
    plenty = OomMessage(requested_bytes=12.5 * 2**20, total_bytes=10.92 * gib, free_bytes=9.28 * gib)
    assert classify_oom(barely) == EXHAUSTION and classify_oom(plenty) == ANOMALOUS


def test_zero_bytes_in_use_beside_allocations_is_not_believed():
    from diagnose.engines.oom import EXHAUSTION, classify_oom, parse_oom_message

    oom = parse_oom_message(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.88 GiB. GPU 3 has a total capacity of "
        "21.96 GiB of which 1.29 GiB is free. Including non-PyTorch memory, this process has 0 bytes memory in "
        "use. Of the allocated memory 18.50 GiB is allocated by PyTorch, and 1.32 GiB is reserved by PyTorch "
        "but unallocated."
    )
    assert oom.process_in_use_bytes is None and oom.other_processes_bytes is None
    assert classify_oom(oom) == EXHAUSTION


def test_hip_messages_are_read_by_their_figures_like_cuda_ones():
    """ROCm's PyTorch runs the same caching allocator and prints the same figures."""
    from diagnose.engines.oom import EXHAUSTION_LIMIT, explain_oom, parse_oom_message

    hip = (
        "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 MiB. GPU 0 has a total capacity "
        "of 255.98 GiB of which 244.65 GiB is free. 1.05 GiB allowed; Of the allocated memory 1017.01 MiB is "
        "allocated by PyTorch, and 54.99 MiB is reserved by PyTorch but unallocated."
    )
    oom = parse_oom_message(hip)
    assert oom is not None and oom.backend == "hip"
    # a 2 MiB request takes a 20 MiB segment, which the 1.05 GiB memory fraction has no room for
    assert explain_oom(oom)[0] == EXHAUSTION_LIMIT
    fragmented = hip.replace("54.99 MiB is reserved", "30.00 GiB is reserved").replace(
        "1.05 GiB allowed; ", ""
    )
    assert classify_oom(parse_oom_message(fragmented)) == FRAGMENTATION


# TensorFlow's BFC report, in the form bfc_allocator.cc prints it (the stats block follows a dump of
# every chunk); the figures are ours.
BFC_REPORT = """\
2023-05-02 10:11:12.123456: W tensorflow/core/common_runtime/bfc_allocator.cc:479] Allocator (GPU_0_bfc) ran out of memory trying to allocate 4.00GiB (rounded to 4294967296)requested by op MatMul
If the cause is memory fragmentation maybe the environment variable 'TF_GPU_ALLOCATOR=cuda_malloc_async' will improve the situation.
Current allocation summary follows.
2023-05-02 10:11:12.123600: I tensorflow/core/common_runtime/bfc_allocator.cc:1049] Chunk at 7f1e4a000000 of size 1280 next 1
2023-05-02 10:11:12.124100: I tensorflow/core/common_runtime/bfc_allocator.cc:1109] Stats:
Limit:                     {limit}
InUse:                      {in_use}
MaxInUse:                  10000000000
LargestFreeBlock:           {largest}

2023-05-02 10:11:12.125000: W tensorflow/core/framework/op_kernel.cc:1780] OP_REQUIRES failed at matmul_op.cc:123 : RESOURCE_EXHAUSTED: OOM when allocating tensor with shape[32768,32768] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc
"""


@pytest.mark.parametrize(
    ("limit", "in_use", "largest", "says"),
    [
        (14_800_000_000, 9_890_000_000, 1_073_741_824, "smaller than the request (fragmented)"),
        (14_800_000_000, 13_000_000_000, 1_073_741_824, "does not fit in the 1.68 GiB left (exhausted)"),
    ],
    ids=["pieces", "limit"],
)
def test_a_bfc_report_is_read_with_its_figures_under_other_back_end(tmp_path, limit, in_use, largest, says):
    from diagnose.engines.oom import OTHER_BACKEND
    from diagnose.importers import Source, recognise

    path = tmp_path / "train.log"
    path.write_text(BFC_REPORT.format(limit=limit, in_use=in_use, largest=largest))
    source = Source.from_path(path)
    importer = recognise(source.text)
    assert importer is not None and importer.name == "pytorch-oom"
    events = importer.read(source).tables["events"]
    assert list(events["oom_class"]) == [OTHER_BACKEND, OTHER_BACKEND]
    assert says in events["oom_reason"].iloc[0]
    # the op's own error: a float tensor of 32768 x 32768 is 4 GiB
    assert "requested 4.00 GiB" in events["oom_reason"].iloc[1]
