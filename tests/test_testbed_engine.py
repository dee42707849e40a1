"""The testbed's real text-generation engine: the tiny model llama.cpp loads, the streaming client's
request log, the engine scenarios, and (where this machine has built it) the engine itself."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import urllib.request

import pytest

gguf = pytest.importorskip("gguf")
httpx = pytest.importorskip("httpx")
starlette = pytest.importorskip("starlette")

from starlette.applications import Starlette  # noqa: E402
from starlette.responses import JSONResponse, StreamingResponse  # noqa: E402
from starlette.routing import Route  # noqa: E402

from testbed.llm import engine  # noqa: E402
from testbed.llm.scenarios import ENGINE_SCENARIOS  # noqa: E402
from testbed.llm.stream import Streamed, completion_body, stream_one  # noqa: E402
from testbed.llm.tiny_model import FEED_FORWARD, LAYERS, VOCAB, WIDTH, vocabulary, write_model  # noqa: E402
from testbed.tokenizer import words  # noqa: E402

SPACE = "\u2581"


def test_every_word_piece_can_be_reached_by_merging_its_prefixes():
    pieces, scores, types = vocabulary(words())
    assert len(pieces) == len(scores) == len(types) == VOCAB
    assert {f"<0x{b:02X}>" for b in range(256)} <= set(pieces)  # the server needs <0x0A>
    known = set(pieces)
    words_in = [p for p in pieces if p.startswith(SPACE) and len(p) > 2]
    assert len(words_in) > 500
    for piece in words_in:
        assert piece[:-1] in known, piece  # SPM merges symbol pairs: a piece whose prefix is missing is dead
    longer = {p: s for p, s in zip(pieces, scores, strict=True) if p in known}
    assert longer[SPACE + "the"] > longer[SPACE + "th"] > longer[SPACE + "t"]


def test_the_model_is_the_same_bytes_for_the_same_seed_and_llama_shaped(tmp_path):
    first = write_model(tmp_path / "a.gguf", words(), seed=3)
    again = write_model(tmp_path / "b.gguf", words(), seed=3)
    other = write_model(tmp_path / "c.gguf", words(), seed=4)
    assert first.read_bytes() == again.read_bytes() != other.read_bytes()
    reader = gguf.GGUFReader(str(first))
    tensors = {t.name: t for t in reader.tensors}
    assert tensors["token_embd.weight"].data.shape == (VOCAB, WIDTH)
    assert tensors["blk.1.ffn_down.weight"].data.shape == (WIDTH, FEED_FORWARD)
    assert not any(name.startswith(f"blk.{LAYERS}.") for name in tensors)
    assert (tensors["output.weight"].data[:5] == 0).all()  # no special token sampled: answers run full
    arch = reader.fields["general.architecture"]
    assert bytes(arch.parts[arch.data[0]]).decode() == "llama"


def _events(*events: dict | str) -> list[str]:
    return [f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n" for e in events]


def _app(lines: list[str], status: int = 200) -> Starlette:
    async def completions(request):
        if status != 200:
            error = {"error": {"type": "exceed_context_size_error", "n_prompt_tokens": 9000, "n_ctx": 6144}}
            return JSONResponse(error, status_code=status)

        async def body():
            for line in lines:
                yield line

        return StreamingResponse(body(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/completions", completions, methods=["POST"])])


def _stream(app: Starlette, max_tokens: int) -> Streamed:
    async def go() -> Streamed:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://engine") as client:
            return await stream_one(client, completion_body("a prompt", max_tokens))

    return asyncio.run(go())


def test_a_streamed_answer_gives_ttft_tpot_and_its_longest_pause():
    seen = Streamed(sent=100.0)
    token = {"choices": [{"text": "x", "finish_reason": None}]}
    for now in (100.050, 100.060, 100.660, 100.670):  # a 600 ms pause between the second and third
        seen.take(token, now)
    seen.take({"choices": [{"text": "", "finish_reason": "length"}]}, 100.671)
    seen.take({"choices": [], "usage": {"prompt_tokens": 17, "completion_tokens": 4}}, 100.672)
    seen.ended = 100.680
    line = seen.record(7, 4)
    assert line["id"] == 7 and line["ts"] == 100.0
    assert (line["input_len"], line["output_len"]) == (17, 4)
    assert (line["ttft_ms"], line["tpot_ms"], line["itl_max_ms"]) == (50.0, 206.667, 600.0)
    assert line["itl_max_at_ms"] == 60.0  # it began with the second token
    assert line["latency_ms"] == 680.0


def test_the_stream_is_read_to_its_end_through_http():
    token = {"choices": [{"text": "x", "finish_reason": None}]}
    last = {"choices": [{"text": "", "finish_reason": "length"}]}
    usage = {"choices": [], "usage": {"prompt_tokens": 17, "completion_tokens": 3}}
    seen = _stream(_app(_events(token, token, token, last, usage, "[DONE]")), max_tokens=3)
    assert seen.status == "ok" and len(seen.token_times) == 3 and seen.prompt_tokens == 17


def test_an_answer_cut_short_by_a_full_context_is_truncated_and_a_refused_prompt_an_error():
    token = {"choices": [{"text": "x", "finish_reason": None}]}
    cut = {"choices": [{"text": "", "finish_reason": "length"}], "usage": {"completion_tokens": 2}}
    assert _stream(_app(_events(token, token, cut, "[DONE]")), max_tokens=64).status == "truncated"
    refused = _stream(_app([], status=400), max_tokens=64).record(1, 64)
    assert refused["status"] == "error" and refused["finish_reason"] == "exceed_context_size_error"
    assert "ttft_ms" not in refused


def test_each_fault_has_a_twin_without_it_under_the_same_load():
    for scenario in ENGINE_SCENARIOS.values():
        twin = scenario.without_fault()
        assert twin.cause is None and twin.name == f"{scenario.name}-fixed"
        assert (twin.stop_at, twin.restart_at, twin.job_period_s, twin.long_prompt_share) == (
            None,
            None,
            None,
            0,
        )
        assert twin.load == scenario.load and twin.slots == scenario.slots
    saturated = ENGINE_SCENARIOS["llm-queue-saturation"]
    assert saturated.ramp_to > 1 and saturated.without_fault().ramp_to is None
    assert "--threads" not in ENGINE_SCENARIOS["llm-over-parallelism"].without_fault().server_options()
    shared = ENGINE_SCENARIOS["llm-kv-cache-pressure"]  # one small cache for all slots; the twin's own apart
    assert shared.server_options()[-3:] == ["-c", "1536", "--kv-unified"]
    assert shared.without_fault().server_options() == ["--parallel", "4", "-c", "24576"]


def test_the_interference_fault_makes_some_prompts_long_at_the_same_arrivals():
    from testbed.llm.runner import with_long_prompts
    from testbed.load import LoadPlan, schedule

    scenario = ENGINE_SCENARIOS["llm-prefill-decode-interference"]
    plain = schedule(LoadPlan(240, 4, seed=1))
    faulty = with_long_prompts(plain, scenario, seed=1)
    assert [r.at_s for r in faulty] == [r.at_s for r in plain]
    long = [r for r in faulty if r.prompt_tokens == scenario.long_prompt_tokens]
    assert 0.05 < len(long) / len(plain) < 0.12 and all(r.max_tokens <= 32 for r in long)
    assert with_long_prompts(plain, scenario.without_fault(), seed=1) == plain


def test_a_machine_without_the_tools_is_told_which_one_is_missing(monkeypatch, tmp_path):
    monkeypatch.setenv("DIAGNOSE_TESTBED_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert engine.find() is None
    reason = engine.why_not_buildable()
    assert reason is not None and "cmake" in reason
    with pytest.raises(engine.EngineUnavailable, match="cmake"):
        engine.ensure(say=lambda _: None)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    built = engine.find()
    if built is None:
        pytest.skip("llama.cpp's server is not built here (python -m testbed engine builds it; CI does not)")
    folder = tmp_path_factory.mktemp("engine")
    model = write_model(folder / "model.gguf", words())
    from testbed.runner import free_port

    port = free_port()
    log = (folder / "server.log").open("wb")
    command = [
        str(built.server),
        "-m",
        str(model),
        "--port",
        str(port),
        "--metrics",
        "--parallel",
        "2",
        "-c",
        "4096",
    ]
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=1) as response:
                if response.status == 200:
                    break
        except OSError:
            time.sleep(0.2)
    yield url, folder / "server.log"
    server.terminate()
    server.wait(timeout=10)


def test_the_real_engine_streams_one_token_an_event_and_its_metrics_are_read_as_an_engines(served):
    url, _ = served

    async def go() -> Streamed:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            return await stream_one(client, completion_body("the quick brown fox " * 20, 32))

    line = asyncio.run(go()).record(0, 32)
    assert line["status"] == "ok" and line["output_len"] == 32 and line["input_len"] > 40
    assert line["ttft_ms"] > 0 and line["tpot_ms"] > 0
    from diagnose.engines.metrics import detect_engine, parse_samples

    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as response:
        page = response.read().decode()
    assert detect_engine(parse_samples(page)) == "llama-cpp"
