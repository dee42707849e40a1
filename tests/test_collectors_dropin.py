"""What users copy into a service (collectors/): standard library only, and read by diagnose as it is written."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pytest

from tests.conftest import ROOT

COLLECTORS = ROOT / "collectors"


def _bare_python(script: str, tmp_path) -> subprocess.CompletedProcess:
    """Python without site-packages (-S) and without this project: the standard library alone."""
    return subprocess.run(
        [sys.executable, "-S", "-c", f"import sys; sys.path.insert(0, {str(COLLECTORS)!r})\n" + script],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )


def test_the_allocator_helper_runs_with_the_standard_library_and_torch_alone(tmp_path):
    out = tmp_path / "allocator.jsonl"
    script = textwrap.dedent(f"""
        import types, time
        assert "numpy" not in sys.modules
        torch = types.ModuleType("torch")
        stats = {{"allocated_bytes.all.current": 3 << 30, "reserved_bytes.all.current": 5 << 30,
                  "num_alloc_retries": 2, "num_ooms": 0}}
        torch.cuda = types.SimpleNamespace(
            is_available=lambda: True, is_initialized=lambda: True, device_count=lambda: 1,
            memory_stats=lambda device: stats,
            memory_snapshot=lambda: [{{"device": 0, "blocks": [{{"state": "inactive", "size": 1 << 28}}]}}],
        )
        sys.modules["torch"] = torch
        import torch_allocator
        try:
            import diagnose
            raise SystemExit("diagnose is importable: the test must run without it")
        except ImportError:
            pass
        torch_allocator.record_allocator({str(out)!r}, interval_s=0.05)
        time.sleep(0.4)
    """)
    done = _bare_python(script, tmp_path)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows and rows[0]["reserved_bytes"] == 5 << 30 and rows[0]["largest_free_block_bytes"] == 1 << 28


def test_the_request_timing_imports_with_the_standard_library_alone(tmp_path):
    done = _bare_python("import asgi_timing; assert 'numpy' not in sys.modules; print('ok')", tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


@pytest.fixture
def timed_service(tmp_path):
    """A Starlette service timed by the middleware, with stages, notes, a stream and an error."""
    sys.path.insert(0, str(COLLECTORS))
    try:
        from asgi_timing import RequestTiming, first_token, note, stage
    finally:
        sys.path.remove(str(COLLECTORS))
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    def generate(request):
        with stage("tokenize"):
            time.sleep(0.002)
        with stage("forward"):
            time.sleep(0.01)
        note(input_len=int(request.query_params.get("n", "10")), output_len=20, batch_size=1)
        return JSONResponse({"ok": True})

    async def stream(request):
        async def tokens():
            for index in range(5):
                if index == 0:
                    first_token()
                yield b"token "
                time.sleep(0.005)

        note(output_len=5)
        return StreamingResponse(tokens())

    def fail(request):
        return JSONResponse({"error": "no"}, status_code=503)

    log = tmp_path / "dump" / "requests.jsonl"
    log.parent.mkdir()
    app = Starlette(routes=[Route("/generate", generate), Route("/stream", stream), Route("/fail", fail)])
    app.add_middleware(RequestTiming, path=str(log))
    return app, log


def test_the_middleware_writes_a_requests_table_that_diagnose_reads_with_every_stage(timed_service, run_cli):
    from starlette.testclient import TestClient

    app, log = timed_service
    with TestClient(app) as client:
        for n in range(40):
            assert client.get(f"/generate?n={n}").status_code == 200
        client.get("/stream")
        client.get("/fail")
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(rows) == 42
    generated = [r for r in rows if r["path"] == "/generate"]
    assert all(r["stage_tokenize_ms"] >= 2 and r["stage_forward_ms"] >= 10 for r in generated)
    assert all(r["latency_ms"] >= r["stage_tokenize_ms"] + r["stage_forward_ms"] for r in generated)
    assert [r["input_len"] for r in generated] == list(range(40))
    streamed = next(r for r in rows if r["path"] == "/stream")
    assert 0 < streamed["ttft_ms"] < streamed["latency_ms"] and streamed["tpot_ms"] > 0
    assert next(r for r in rows if r["path"] == "/fail")["status"] == 503
    code, out, err = run_cli("file", log.parent, "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    assert {"tokenize", "forward"} <= set(report["summary"]["stages"])
    assert report["facts"]["requests.error_rate"]["value"] == pytest.approx(1 / 42)


def test_timing_outside_a_request_does_nothing():
    sys.path.insert(0, str(COLLECTORS))
    try:
        from asgi_timing import note, stage
    finally:
        sys.path.remove(str(COLLECTORS))
    with stage("tokenize"):
        pass
    note(input_len=3)  # no request: no error, no record
