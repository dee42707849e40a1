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


_STUBS = {
    "nvidia-smi": r"""#!/usr/bin/env bash
case "$*" in
  *--query-gpu*)
    echo "timestamp, index, uuid, name, utilization.gpu [%], memory.used [MiB], memory.total [MiB], clocks.sm [MHz], clocks.max.sm [MHz], power.draw [W], temperature.gpu, clocks_event_reasons.active"
    while true; do
      echo "$(date -u '+%Y/%m/%d %H:%M:%S.000'), 0, GPU-11111111-2222-3333-4444-555555555555, NVIDIA H200, 87 %, 40960 MiB, 143771 MiB, 1980 MHz, 1980 MHz, 512.00 W, 61, 0x0000000000000000"
      sleep 1
    done ;;
  *dmon*)
    echo "#Date       Time        gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk"
    echo "#YYYYMMDD   HH:MM:SS    Idx      W      C      C      %      %      %      %      %      %    MHz    MHz"
    for _ in 1 2 3; do echo "$(date -u '+%Y%m%d   %H:%M:%S')      0    512     61      -     87     40      0      0      0      0   2619   1980"; sleep 1; done ;;
  *) echo "stub nvidia-smi" ;;
esac
""",
    "curl": r"""#!/usr/bin/env bash
cat <<'METRICS'
# HELP vllm:num_requests_running Number of requests currently running on GPU.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 12.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="m"} 3.0
METRICS
""",
    "dmesg": "#!/usr/bin/env bash\necho '[Tue Dec  2 05:00:00 2026] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.'\n",
}


def test_the_snapshot_script_collects_what_diagnose_reads_with_stock_tools(tmp_path, run_cli):
    tools = tmp_path / "bin"
    tools.mkdir()
    for name, body in _STUBS.items():
        (tools / name).write_text(body)
        (tools / name).chmod(0o755)
    out = tmp_path / "snap"
    env = {"PATH": f"{tools}:/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run(
        ["bash", str(COLLECTORS / "snapshot.sh"), str(out), "4", "http://127.0.0.1:9/metrics"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "analyse it with: diagnose file" in done.stderr
    assert {"query-gpu.csv", "dmon.txt", "metrics.prom", "xid.log"} <= {p.name for p in out.iterdir()}
    code, report_text, err = run_cli("file", out, "--format", "json")
    assert code == 0, err
    report = json.loads(report_text)
    read = {entry["file"]: entry["importer"] for entry in report["evidence"]["importers"]}
    assert {"query-gpu.csv", "metrics.prom", "xid.log"} <= set(read), read
    assert report["evidence"]["tables"]["gpu"]["rows"] >= 3
    assert report["evidence"]["tables"]["server"]["rows"] >= 3


def test_the_snapshot_script_refuses_bad_arguments(tmp_path):
    done = subprocess.run(
        ["bash", str(COLLECTORS / "snapshot.sh"), str(tmp_path / "x"), "soon"],
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert done.returncode == 2 and "SECONDS must be a whole number" in done.stderr


# -- deployment files for the flight recorder ------------------------------------------------------


def _accepted_by_the_cli(args: list[str]) -> None:
    """The deployment's command line parses, and its triggers and spans are valid, in this version."""
    from diagnose.cli import _parser
    from diagnose.collectors.triggers import parse_trigger
    from diagnose.units import parse_duration, parse_size

    parsed = _parser().parse_args(args)
    assert parsed.command == "record" and parsed.ring
    for span in (parsed.ring, parsed.after, parsed.cooldown, parsed.trigger_window):
        assert span is None or parse_duration(span)
    assert parsed.ring_max_size is None or parse_size(parsed.ring_max_size)
    assert parsed.trigger and all(parse_trigger(text) for text in parsed.trigger)


def test_the_systemd_unit_runs_a_flight_recorder_this_version_accepts():
    import configparser
    import shlex

    unit = COLLECTORS / "systemd" / "diagnose-flight-recorder.service"
    text = unit.read_text(encoding="utf-8").replace("\\\n", " ")
    sections = configparser.ConfigParser(interpolation=None, strict=False)
    sections.read_string(text)
    service = sections["Service"]
    program, *args = shlex.split(service["ExecStart"])
    assert program.endswith("/diagnose")
    _accepted_by_the_cli(args)
    assert service["ExecReload"] == "/bin/kill -USR1 $MAINPID"  # systemctl reload = dump now
    assert service["KillSignal"] in ("SIGINT", "SIGTERM")  # the signals the recorder stops cleanly on


def test_the_systemd_unit_passes_systemd_analyze(tmp_path):
    import shutil

    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    unit = tmp_path / "diagnose-flight-recorder.service"
    unit.write_text((COLLECTORS / "systemd" / unit.name).read_text(encoding="utf-8"), encoding="utf-8")
    result = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60)
    problems = [
        line
        for line in (result.stdout + result.stderr).splitlines()
        if unit.name in line and "/usr/local/bin/diagnose" not in line  # not installed on a test host
    ]
    assert not problems, problems


def test_the_daemonset_sees_the_host_reads_nvml_and_takes_no_gpu():
    import yaml

    documents = list(
        yaml.safe_load_all((COLLECTORS / "kubernetes" / "flight-recorder-daemonset.yaml").read_text())
    )
    (daemonset,) = [d for d in documents if d["kind"] == "DaemonSet"]
    pod = daemonset["spec"]["template"]["spec"]
    assert pod["hostPID"] is True and pod["hostNetwork"] is True
    (container,) = pod["containers"]
    _accepted_by_the_cli(container["args"])
    env = {item["name"]: item["value"] for item in container["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all" and "utility" in env["NVIDIA_DRIVER_CAPABILITIES"]
    resources = json.dumps(container["resources"])
    assert "nvidia.com/gpu" not in resources  # a monitor must not take a GPU from the scheduler
    output = container["args"][container["args"].index("-o") + 1]
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert output in mounts  # the dumps outlive the pod, on the node
    assert pod["terminationGracePeriodSeconds"] >= 30  # time to write a pending dump on stop
