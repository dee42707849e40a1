"""A fleet sweep's parts that need no server: shards, merging, a busy server's retries, the Job manifest."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
import yaml

from diagnose.errors import InputError
from diagnose.pull import PrometheusClient
from diagnose.pull.fleet import HostResult, _write_summary, in_shard, merge

ROOT = Path(__file__).resolve().parents[1]


def test_every_host_is_in_exactly_one_shard_whatever_the_count():
    hosts = [f"gpu-node-{i}.pool-{i % 7}:9100" for i in range(1000)]
    for count in (1, 2, 4, 7, 16):
        owners = [[k for k in range(count) if in_shard(host, k, count)] for host in hosts]
        assert all(len(owner) == 1 for owner in owners)
        sizes = [sum(owner == [k] for owner in owners) for k in range(count)]
        assert min(sizes) > len(hosts) / count * 0.7  # a stable hash spreads them, no shard left idle


def _shard(
    folder: Path, index: int, count: int, hosts: list[str], window: str = "2026-12-04T00:00:00Z"
) -> None:
    results = [HostResult(host, f"sweep/{host}", [{"id": "gpu-throttling", "score": 0.9}]) for host in hosts]
    _write_summary(folder, results, "http://prom:9090", window, "2026-12-04T01:00:00Z", (index, count))


def test_shards_merge_into_what_one_sweep_writes_and_a_missing_or_foreign_shard_is_named(tmp_path):
    hosts = [f"h{i}" for i in range(9)]
    for index in range(3):
        _shard(tmp_path, index, 3, [h for h in hosts if in_shard(h, index, 3)])
    merged = merge([tmp_path], tmp_path / "out")
    assert [r.host for r in merged] == sorted(hosts)
    one = tmp_path / "one"
    one.mkdir()
    results = [HostResult(h, f"sweep/{h}", [{"id": "gpu-throttling", "score": 0.9}]) for h in reversed(hosts)]
    _write_summary(one, results, "http://prom:9090", "2026-12-04T00:00:00Z", "2026-12-04T01:00:00Z")
    assert (tmp_path / "out" / "fleet.json").read_text() == (one / "fleet.json").read_text()
    assert (tmp_path / "out" / "fleet.md").read_text() == (one / "fleet.md").read_text()
    (tmp_path / "fleet-shard-1-of-3.json").unlink()
    with pytest.raises(InputError, match="shard 1 of 3 missing"):
        merge([tmp_path], tmp_path / "out")
    other = tmp_path / "other"
    other.mkdir()
    _shard(other, 1, 3, ["h1"], window="2026-12-03T00:00:00Z")
    with pytest.raises(InputError, match="another sweep"):
        merge([tmp_path, other], tmp_path / "out")


class _Busy(BaseHTTPRequestHandler):
    """429 twice (once with Retry-After), then an answer."""

    calls = 0

    def do_GET(self) -> None:  # noqa: N802 - the handler's name
        type(self).calls += 1
        if type(self).calls <= 2:
            self.send_response(429)
            if type(self).calls == 1:
                self.send_header("Retry-After", "0")
            self.end_headers()
            return
        body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def test_a_busy_server_is_asked_again_after_a_pause(monkeypatch):
    import diagnose.pull.client as client_module

    pauses = []
    monkeypatch.setattr(client_module, "_pause", pauses.append)
    server = HTTPServer(("127.0.0.1", 0), _Busy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = PrometheusClient(f"http://127.0.0.1:{server.server_port}")
        assert client.query("up", 0.0) == []
    finally:
        server.shutdown()
    assert _Busy.calls == 3 and pauses == [0.0, 1.0]  # Retry-After: 0, then the doubled first pause


def test_a_client_travels_to_a_worker_process_as_its_settings():
    """It reduces to its settings (what a process pool sends), rebuilt on the other side."""
    client = PrometheusClient("https://prom.example:9090/", timeout_s=7.0)
    rebuild, settings = client.__reduce__()
    copy = rebuild(*settings)
    assert copy.url == "https://prom.example:9090" and copy._timeout == 7.0


def test_the_indexed_job_manifest_sweeps_one_shard_a_pod():
    """A schema check where kubectl is not at hand: an Indexed Job whose pods each pull their own shard
    of the same count into a shared volume, and a merge once they are done."""
    documents = list(
        yaml.safe_load_all((ROOT / "collectors" / "kubernetes" / "fleet-sweep-job.yaml").read_text())
    )
    job = next(d for d in documents if d and d.get("kind") == "Job")
    spec = job["spec"]
    assert job["apiVersion"] == "batch/v1" and spec["completionMode"] == "Indexed"
    count = spec["completions"]
    assert spec["parallelism"] <= count
    container = spec["template"]["spec"]["containers"][0]
    command = " ".join(container.get("command", []) + container.get("args", []))
    assert "--all-instances" in command and f"--shard $(JOB_COMPLETION_INDEX)/{count}" in command
    assert spec["template"]["spec"]["restartPolicy"] in ("Never", "OnFailure")
    assert "--resume" in command  # a pod restarted by the Job picks up where it stopped
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert any(m in command for m in mounts)


def test_the_fleet_report_groups_hosts_by_finding_and_says_what_they_share(tmp_path):
    """Ten hosts of two pools, the throttled ones all in pool b: the section names them, strongest first,
    and says pool b is theirs (3 of 3, 4 of 10 in the fleet) before the GPU model every host has."""
    results = []
    for i in range(10):
        pool = "b" if i % 2 else "a"
        hot = i in (1, 3, 5)
        findings = [{"id": "gpu-throttling", "score": 0.9 - i / 100}] if hot else []
        labels = {"label_node_pool": pool, "gpu_model": "NVIDIA H100"}
        if i == 9:
            labels["label_node_pool"] = "c"
        results.append(HostResult(f"h{i}", f"sweep/h{i}", findings, labels=labels))
    results.append(HostResult("h10", None, [], "cannot connect"))
    _write_summary(tmp_path, results, "http://prom:9090", "2026-12-04T00:00:00Z", "2026-12-04T01:00:00Z")
    lines = (tmp_path / "fleet.md").read_text().splitlines()
    section = lines.index("## gpu-throttling: 3 of 10 hosts")
    assert lines[section + 2] == "h1 0.89, h3 0.87, h5 0.85."
    shared = lines[section + 6 : section + 8]
    assert shared == [
        "- label_node_pool = b: 3 of 3 (in the fleet: 4 of 10)",
        "- gpu_model = NVIDIA H100: 3 of 3 (in the fleet: 10 of 10)",
    ]
    assert "10 hosts analysed, 1 not" in lines[2]
    assert json.loads((tmp_path / "fleet.json").read_text())["hosts"][1]["labels"]["label_node_pool"] == "b"


def test_a_pulled_dump_gpu_model_is_hardware_to_compare():
    """Two hosts' pulled dumps on different GPU models are not comparable; a different pool is listed."""
    from diagnose.compare.environment import describe, differences
    from diagnose.dump.model import Dump, Manifest

    def pulled(model: str, pool: str) -> Dump:
        environment = {"gpu_model": model, "label_node_pool": pool}
        return Dump("d", {}, {}, Manifest(extra={"environment": environment}))

    found = {
        d.what: d for d in differences(describe(pulled("H100", "a")), describe(pulled("A100", "b")), {}, {})
    }
    assert found["GPU model"].blocks and found["GPU model"].kind == "hardware"
    assert not found["label_node_pool"].blocks
