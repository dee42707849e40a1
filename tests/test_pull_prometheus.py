"""`diagnose pull` against a real Prometheus server scraping exporters the test runs (no mocked HTTP).

The server is the distribution's ``prometheus`` (``.ci/run`` installs it where
it is missing); it scrapes two fake hosts every second for about half a
minute, then the tests pull windows through its HTTP API and compare the
dumps with what the exporters logged that they served.
"""

from __future__ import annotations

import bisect
import json
import shutil
import subprocess
import sys
import time
import urllib.request

import pytest
import yaml

from diagnose.dump import load_dump
from diagnose.errors import InputError
from diagnose.pull import Auth, PrometheusClient
from diagnose.pull.pull import parse_time
from diagnose.pull.queries import selector
from tests.conftest import ROOT
from tests.helpers.service import free_port, wait_for

pytestmark = pytest.mark.waits  # real servers and loads: its file is handed out first

EXPORTER = ROOT / "tests" / "helpers" / "fake_exporter.py"
GIB = 1 << 30
SCRAPED_S = 22  # the Xid flips at 10 s and host 2 restarts at 15 s: both well inside


# The servers `diagnose pull` is tested against, each the distribution's package: Prometheus itself, and
# VictoriaMetrics, which answers the same HTTP API (as Thanos and Mimir do) with its own engine.
SERVERS = {
    "prometheus": lambda binary, config, data, port: [
        binary, f"--config.file={config}", f"--storage.tsdb.path={data}",
        f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn",
    ],
    "victoria-metrics": lambda binary, config, data, port: [
        binary, f"-promscrape.config={config}", f"-storageDataPath={data}",
        f"-httpListenAddr=127.0.0.1:{port}", "-loggerLevel=ERROR",
        "-search.latencyOffset=1s",  # by default the last 30 s are not served yet
    ],
}  # fmt: skip
READY = {"prometheus": "/-/ready", "victoria-metrics": "/health"}


@pytest.fixture(scope="module", params=sorted(SERVERS))
def prometheus(request, tmp_path_factory):
    """A real server of the Prometheus HTTP API scraping two fake hosts every second: (url, folder, began)."""
    binary = shutil.which(request.param)
    if binary is None:
        pytest.skip(f"{request.param} is not installed (.ci/run installs the distribution's package)")
    folder = tmp_path_factory.mktemp(request.param)
    exporters, targets = [], []
    for host in (1, 2):
        port, log = free_port(), folder / f"served-{host}.jsonl"
        exporters.append(subprocess.Popen([sys.executable, str(EXPORTER), str(port), str(host), str(log)]))
        targets.append(
            f'      - targets: ["127.0.0.1:{port}"]\n        labels: {{instance: "gpu-node-{host}:9100"}}'
        )
    config = folder / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s}\n"
        "scrape_configs:\n  - job_name: gpu-nodes\n    static_configs:\n" + "\n".join(targets) + "\n"
    )
    port = free_port()
    server = subprocess.Popen(
        SERVERS[request.param](binary, config, folder / "data", port),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        try:
            return urllib.request.urlopen(f"{url}{READY[request.param]}", timeout=1).status == 200
        except OSError:
            return False

    try:
        wait_for(ready, timeout=60)
        began = time.time()
        time.sleep(SCRAPED_S)
        yield url, folder, began
    finally:
        server.terminate()
        server.wait(timeout=30)
        for exporter in exporters:
            exporter.terminate()
            exporter.wait(timeout=10)


def _served(folder, host: int) -> tuple[list[float], list[dict]]:
    lines = [json.loads(line) for line in (folder / f"served-{host}.jsonl").read_text().splitlines()]
    return [line["t"] for line in lines], lines


def _diagnose(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "diagnose", *args], capture_output=True, text=True, timeout=300
    )


def _pull(url: str, out, *args: str) -> subprocess.CompletedProcess:
    return _diagnose("pull", "--prometheus", url, "-o", str(out), *args)


def test_a_pulled_dump_holds_what_the_exporter_served_at_those_times(prometheus, tmp_path):
    url, folder, began = prometheus
    start, end = began + 2, time.time() - 1
    result = _pull(url, tmp_path / "d", "--instance", "gpu-node-1", "--from", f"{start}", "--to", f"{end}")
    assert result.returncode == 0, result.stderr
    dump = load_dump(str(tmp_path / "d"))
    times, served = _served(folder, 1)

    def candidates(ts: float) -> list[dict]:
        """What the scrapes just before ts served: the last one, or (a scrape late or missed on a loaded
        machine, its stamp taken before the exporter answers) the one or two before it. Values change
        every 3 s, so a dump a step behind or ahead, or another host's, does not pass."""
        return served[bisect.bisect_right(times, ts - 2.5) : bisect.bisect_right(times, ts + 1.0)]

    system, gpu, server = dump.table("system"), dump.table("gpu"), dump.table("server")
    assert len(system) >= SCRAPED_S - 6 and set(gpu["gpu"]) == {0, 1}
    for row in system.itertuples():
        seen = candidates(row.ts)
        assert row.load1 in [s["load1"] for s in seen]
        assert row.mem_used_bytes in [64 * GIB - s["mem_available"] for s in seen]
    for row in gpu.itertuples():
        seen = candidates(row.ts)
        if row.gpu == 0:
            assert row.util_pct in [s["util0"] for s in seen]
            assert row.mem_used_bytes in [s["fb_used0"] * (1 << 20) for s in seen]
        else:
            assert row.util_pct == 51
    for row in server.itertuples():
        assert row.queue_depth in [s["waiting"] for s in candidates(row.ts)]
    # counters became rates, histograms means and per-step percentiles from their own buckets
    cpu, rps = system["cpu_pct"].dropna(), server["throughput_rps"].dropna()
    assert len(cpu) >= len(system) - 2 and cpu.between(45, 55).all()
    assert rps.between(4.5, 5.5).all() and server["e2e_ms"].dropna().round(3).eq(200).all()
    assert server["e2e_p50_ms"].dropna().between(100, 250).all()
    # resets() of a counter that only rose: the query runs on a real Prometheus and finds no restart
    assert server["counter_resets"].notna().any() and server["counter_resets"].fillna(0).eq(0).all()
    # dcgm-exporter's Xid gauge: the change to 79 is an event when it happened
    xid_from = next(s["t"] for s in served if s["xid0"])
    (xid,) = dump.table("events").query("kind == 'xid'").itertuples()
    assert xid_from - 0.5 <= xid.ts <= xid_from + 1.5 and xid.message == "Xid 79"
    manifest = yaml.safe_load((tmp_path / "d" / "manifest.yaml").read_text())
    assert manifest["interval_s"] == 1 and manifest["pulled"]["scrape_interval_s"] == pytest.approx(
        1, abs=0.1
    )
    assert {s["status"] for s in manifest["sources"].values()} == {"ok"}
    assert "DCGM_FI_DEV_GPU_UTIL" in manifest["pulled"]["queries"]["gpu"]["util_pct"]
    analysed = _diagnose("file", str(tmp_path / "d"), "--format", "json")
    assert analysed.returncode == 0, analysed.stderr


def test_process_exporter_groups_are_pulled_as_processes_and_named_as_groups(prometheus, tmp_path):
    url, folder, began = prometheus
    start, end = began + 4, time.time() - 1
    result = _pull(url, tmp_path / "d", "--instance", "gpu-node-1", "--from", f"{start}", "--to", f"{end}")
    assert result.returncode == 0, result.stderr
    processes = load_dump(str(tmp_path / "d")).table("processes")
    assert set(processes["group"]) == {"vllm", "backup"} and "pid" not in processes.columns
    vllm, backup = (processes[processes["group"] == g] for g in ("vllm", "backup"))
    assert (
        vllm["cpu_pct"].dropna().between(140, 160).all() and backup["cpu_pct"].dropna().between(20, 30).all()
    )
    # the tokenizer thread (one of its name) at 90 %, not the 30 python threads' 30 % in sum
    assert vllm["max_thread_cpu_pct"].dropna().between(85, 95).all()
    times, served = _served(folder, 1)
    for row in vllm.itertuples():
        near = served[bisect.bisect_right(times, row.ts - 2.5) : bisect.bisect_right(times, row.ts + 1.0)]
        assert row.rss_bytes in [s["vllm_rss"] for s in near]
    manifest = yaml.safe_load((tmp_path / "d" / "manifest.yaml").read_text())
    assert manifest["sources"]["process_exporter"]["status"] == "ok"
    report = json.loads(_diagnose("file", str(tmp_path / "d"), "--format", "json").stdout)
    assert report["facts"]["thread.busiest.process"]["value"] == "process-exporter group vllm"
    assert report["facts"]["thread.busiest.cpu_pct"]["value"] == pytest.approx(90, abs=5)
    assert "thread.busiest.pid" not in report["facts"]
    # a host without process-exporter has no such source, and no dead source for it either
    result = _pull(url, tmp_path / "e", "--instance", "gpu-node-2", "--from", f"{start}", "--to", f"{end}")
    assert result.returncode == 0, result.stderr
    manifest = yaml.safe_load((tmp_path / "e" / "manifest.yaml").read_text())
    assert "process_exporter" not in manifest["sources"] and not (tmp_path / "e" / "processes.csv").exists()


def test_a_sweep_writes_one_dump_per_host_and_the_fleet_summary(prometheus, tmp_path):
    url, _, began = prometheus
    out = tmp_path / "sweep"
    result = _pull(url, out, "--all-instances", "--job", "gpu-.*", "--from", f"{began + 2}", "--to", "now")
    assert result.returncode == 0, result.stderr
    assert "diagnose: 2 of 2 hosts, " in result.stderr  # the progress line after each host
    dumps = sorted(p.name for p in out.iterdir() if p.is_dir() and not p.name.startswith("."))
    assert dumps == ["gpu-node-1", "gpu-node-2"]  # and .sweep/, the finished hosts for --resume
    for host in ("gpu-node-1", "gpu-node-2"):
        assert len(load_dump(str(out / host)).table("gpu")) > 0
    fleet = json.loads((out / "fleet.json").read_text())
    assert [h["host"] for h in fleet["hosts"]] == ["gpu-node-1", "gpu-node-2"]
    assert all(h["problem"] is None and h["dump"] for h in fleet["hosts"])
    # host 1's GPUs are thermally throttled, host 2's are not: the summary says which host shows it
    likely = {h["host"]: {f["id"] for f in h["findings"] if f["score"] >= 0.5} for h in fleet["hosts"]}
    assert "gpu-throttling" in likely["gpu-node-1"] and "gpu-throttling" not in likely["gpu-node-2"]
    lines = (out / "fleet.md").read_text().splitlines()
    table = next(i for i, line in enumerate(lines) if line.startswith("| host |"))
    column = [cell.strip() for cell in lines[table].split("|")].index("gpu-throttling")
    rows = {line.split("|")[1].strip(): line.split("|") for line in lines[table + 2 :]}
    assert rows["gpu-node-1"][column].strip() and not rows["gpu-node-2"][column].strip()
    # The finding's section names its host and what the series say of it: the GPU model, from the labels
    section = lines.index("## gpu-throttling: 1 of 2 hosts")
    assert lines[section + 2].startswith("gpu-node-1 ")
    assert "- gpu_model = NVIDIA H100 80GB HBM3: 1 of 1 (in the fleet: 2 of 2)" in lines
    assert fleet["hosts"][0]["labels"]["gpu_model"] == "NVIDIA H100 80GB HBM3"


def test_an_unknown_host_is_an_error_that_names_the_hosts_there(prometheus, tmp_path):
    url, _, _ = prometheus
    result = _pull(url, tmp_path / "d", "--instance", "gpu-node-9", "--from", "now-20s")
    assert result.returncode == 2
    assert (
        "no series for instance 'gpu-node-9'" in result.stderr and "gpu-node-1, gpu-node-2" in result.stderr
    )
    assert not (tmp_path / "d").exists()


def test_a_token_is_sent_but_lands_nowhere_a_coarse_step_is_said_and_a_restart_seen(prometheus, tmp_path):
    url, folder, began = prometheus
    token = tmp_path / "token"
    token.write_text("s3cr3t-t0ken-value\n")
    result = _pull(
        url, tmp_path / "d", "--instance", "gpu-node-2", "--from", f"{began + 2}", "--step", "5s",
        "--bearer-token-file", str(token),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    written = "".join(p.read_text() for p in (tmp_path / "d").iterdir())
    assert "s3cr3t" not in written + result.stdout + result.stderr
    manifest = yaml.safe_load((tmp_path / "d" / "manifest.yaml").read_text())
    assert manifest["interval_s"] == 5 and any("coarse" in note for note in manifest["pulled"]["notes"])
    assert "coarse" in result.stderr
    # the engine's process start time moved: a restart, in the events and the manifest
    (restart,) = load_dump(str(tmp_path / "d")).table("events").query("kind == 'restart'").itertuples()
    _, served = _served(folder, 2)
    # VictoriaMetrics keeps about 15 significant digits: an epoch time comes back within a microsecond
    assert restart.ts == pytest.approx(max(s["process_start"] for s in served), abs=1e-3)
    assert len(manifest["process_start"]) == 1


# -- without a server ------------------------------------------------------------------------------


def test_times_are_read_with_their_zone_or_relative_to_now():
    now = 1_796_000_000.0
    assert parse_time("now", now) == now and parse_time("now-1h", now) == now - 3600
    assert parse_time("-90s", now) == now - 90 and parse_time("1795999000", now) == 1_795_999_000
    assert parse_time("2026-12-02T03:00:00+08:00") == parse_time("2026-12-01T19:00:00Z")
    with pytest.raises(InputError, match="say the zone"):
        parse_time("2026-12-02T03:00:00")


def test_the_selector_matches_a_host_on_any_port_and_escapes_it():
    assert selector("10.0.0.7") == 'instance=~"10\\\\.0\\\\.0\\\\.7(:[0-9]+)?"'


def test_credentials_come_from_a_file_or_a_variable_and_never_from_the_url(tmp_path, monkeypatch):
    (tmp_path / "pair").write_text("alice:pw\n")
    assert Auth.from_options(basic_auth_file=tmp_path / "pair").basic == ("alice", "pw")
    monkeypatch.setenv("PROM_TOKEN", "t")
    assert Auth.from_options(bearer_token_env="PROM_TOKEN").headers() == {"Authorization": "Bearer t"}
    (tmp_path / "empty").write_text("")
    for kwargs, said in [
        ({"bearer_token_file": tmp_path / "empty"}, "is empty"),
        ({"bearer_token_env": "NOT_SET_ANYWHERE"}, "not set or empty"),
        ({"basic_auth_file": tmp_path / "missing"}, "cannot read"),
        ({"bearer_token_env": "PROM_TOKEN", "basic_auth_file": tmp_path / "pair"}, "not both"),
    ]:
        with pytest.raises(InputError, match=said):
            Auth.from_options(**kwargs)
    with pytest.raises(InputError, match="not the URL"):
        PrometheusClient("http://alice:pw@prometheus:9090")


def test_a_server_that_does_not_answer_is_exit_2_naming_it(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    result = _pull(url, tmp_path / "d", "--instance", "h", "--from", "now-1m")
    assert result.returncode == 2 and f"{url}: cannot connect" in result.stderr


def test_a_sweep_in_two_shards_merged_is_the_single_sweep_and_a_resumed_one_redoes_nothing(
    prometheus, tmp_path
):
    """The same window swept whole, then in two shards into the same folder (as the pods of an Indexed
    Job share a volume) and merged: the same fleet.json, byte for byte; then a sweep resumed after a
    host's result was lost redoes that host only."""
    url, _, began = prometheus
    out, shared = tmp_path / "sweep", tmp_path / "shared"
    window = ("--all-instances", "--from", f"{began + 2}", "--to", f"{began + SCRAPED_S - 2}")
    assert _pull(url, out, *window, "--max-concurrency", "2").returncode == 0
    single = (out / "fleet.json").read_text()
    for index in (0, 1):
        result = _pull(url, shared, *window, "--shard", f"{index}/2")
        assert result.returncode == 0, result.stderr
        assert (shared / f"fleet-shard-{index}-of-2.json").exists()
    merged = _diagnose("fleet", "merge", str(shared))
    assert merged.returncode == 0, merged.stderr
    assert (shared / "fleet.json").read_text().replace(str(shared), str(out)) == single
    kept = (out / "gpu-node-1" / "manifest.yaml").stat().st_mtime_ns
    (out / ".sweep" / "gpu-node-2.json").unlink()
    resumed = _pull(url, out, *window, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert "1 of 2 hosts already done" in resumed.stderr
    assert (out / "gpu-node-1" / "manifest.yaml").stat().st_mtime_ns == kept
    assert (out / "fleet.json").read_text() == single
    moved = ("--all-instances", "--from", f"{began + 3}", "--to", f"{began + SCRAPED_S - 2}")
    again = _pull(url, out, *moved, "--resume")  # as "--from now-5m" a minute later: another window
    assert again.returncode == 0, again.stderr
    assert "not this window" in again.stderr and "pulled again" in again.stderr
