"""From alert to diagnosis with real servers: Prometheus fires a rule, Alertmanager sends the webhook,
``diagnose serve`` pulls the host from that Prometheus and keeps the report.

The servers are the distribution's packages (``prometheus``,
``prometheus-alertmanager``; ``.ci/run`` installs them, the tests skip where
they are absent). Two fake hosts are scraped every second; every request takes
0.2 s, and the rule fires when a host's P99 is above 150 ms, so both fire.
Host 1's GPUs are held down by thermal slowdown: its report's first hypothesis
is gpu-throttling.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import psutil
import pytest

from diagnose.archive import Archive
from tests.conftest import ROOT
from tests.helpers.service import free_port, wait_for

pytestmark = pytest.mark.waits  # real servers and loads: its file is handed out first

EXPORTER = ROOT / "tests" / "helpers" / "fake_exporter.py"
TOKEN = "alertmanager-sends-this-token"
DIAGNOSED_WITHIN_S = 150  # rule's for: 20 s, Alertmanager's group_wait, a pull and an analysis each

RULES = """\
groups:
  - name: latency
    rules:
      - alert: HighP99Latency
        expr: histogram_quantile(0.99, sum by (instance, le) (rate(vllm:e2e_request_latency_seconds_bucket[5s]))) > 0.15
        for: 20s
        annotations: {summary: "P99 above 150 ms"}
"""


def _binary(*names: str) -> str:
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    pytest.skip(f"{names[0]} is not installed (.ci/run installs the distribution's package)")


def _ready(url: str) -> bool:
    try:
        return urllib.request.urlopen(url, timeout=1).status == 200
    except OSError:
        return False


def _scraped_seconds(prometheus: str) -> float:
    """How many 1 s scrapes of the least scraped fake host Prometheus holds from the last two minutes."""
    query = urllib.parse.urlencode({"query": 'min(count_over_time(up{job="gpu-nodes"}[2m]))'})
    with urllib.request.urlopen(f"{prometheus}/api/v1/query?{query}", timeout=10) as answer:
        result = json.loads(answer.read())["data"]["result"]
    return float(result[0]["value"][1]) if result else 0.0


def _gone(process: psutil.Process) -> bool:
    try:
        return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


class Serve:
    """``diagnose serve`` as a user starts it, in a process of its own."""

    def __init__(self, folder: Path, prometheus: str, port: int, *options: str) -> None:
        self.url, self.folder, self.log = f"http://127.0.0.1:{port}", folder, folder / "serve.log"
        token = folder / "token"
        token.write_text(TOKEN + "\n")
        self.command = [
            sys.executable, "-m", "diagnose", "serve", "--prometheus", prometheus, "--data", str(folder / "data"),
            "--listen", f"127.0.0.1:{port}", "--token-file", str(token), "--before", "2m", "--after", "5s",
            "--archive", str(folder / "archive.sqlite"), *options,
        ]  # fmt: skip
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        with open(self.log, "a") as log:
            self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT)
        wait_for(lambda: _ready(f"{self.url}/-/healthy"), timeout=60)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(timeout=30)

    def get(self, path: str):
        request = urllib.request.Request(f"{self.url}{path}", headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.read()

    def alerts(self) -> list[dict]:
        return json.loads(self.get("/api/alerts"))

    def post(self, body: dict) -> dict:
        request = urllib.request.Request(
            f"{self.url}/alerts",
            json.dumps(body).encode(),
            {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.loads(answer.read())


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """Two fake hosts, a Prometheus scraping them with the rule, an Alertmanager, and diagnose serve as
    Alertmanager's receiver: (serve, prometheus url)."""
    prometheus_bin = _binary("prometheus")
    alertmanager_bin = _binary("prometheus-alertmanager", "alertmanager")
    folder = tmp_path_factory.mktemp("alerting")
    processes = []
    targets = []
    for host in (1, 2):
        port = free_port()
        processes.append(
            subprocess.Popen(
                [sys.executable, str(EXPORTER), str(port), str(host), str(folder / f"served-{host}")]
            )
        )
        targets.append(
            f'      - targets: ["127.0.0.1:{port}"]\n        labels: {{instance: "gpu-node-{host}:9100"}}'
        )
    serve_port, alertmanager_port, prometheus_port = free_port(), free_port(), free_port()
    (folder / "am-token").write_text(TOKEN)
    (folder / "alertmanager.yml").write_text(
        "route: {receiver: diagnose, group_by: [alertname], group_wait: 1s, group_interval: 2s, "
        "repeat_interval: 4s}\n"
        "receivers:\n  - name: diagnose\n    webhook_configs:\n"
        f"      - url: http://127.0.0.1:{serve_port}/alerts\n        send_resolved: true\n"
        f"        http_config: {{authorization: {{credentials_file: {folder / 'am-token'}}}}}\n"
    )
    (folder / "rules.yml").write_text(RULES)
    (folder / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"rule_files: [{folder / 'rules.yml'}]\n"
        f'alerting: {{alertmanagers: [{{static_configs: [{{targets: ["127.0.0.1:{alertmanager_port}"]}}]}}]}}\n'
        "scrape_configs:\n  - job_name: gpu-nodes\n    static_configs:\n" + "\n".join(targets) + "\n"
    )
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    processes.append(
        subprocess.Popen(
            [
                alertmanager_bin, f"--config.file={folder / 'alertmanager.yml'}",
                f"--storage.path={folder / 'am-data'}", f"--web.listen-address=127.0.0.1:{alertmanager_port}",
                "--cluster.listen-address=", "--log.level=warn",
            ],
            **quiet,
        )
    )  # fmt: skip
    prometheus = f"http://127.0.0.1:{prometheus_port}"
    processes.append(
        subprocess.Popen(
            [
                prometheus_bin, f"--config.file={folder / 'prometheus.yml'}", f"--storage.tsdb.path={folder / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{prometheus_port}", "--log.level=warn",
            ],
            **quiet,
        )
    )  # fmt: skip
    serve = Serve(folder, prometheus, serve_port, "--workers", "2")
    try:
        wait_for(lambda: _ready(f"http://127.0.0.1:{alertmanager_port}/-/ready"), timeout=60)
        wait_for(lambda: _ready(f"{prometheus}/-/ready"), timeout=60)
        serve.start()
        yield serve, prometheus
    finally:
        serve.stop()
        for process in reversed(processes):
            process.terminate()
            process.wait(timeout=30)


def test_a_fired_alert_arrives_diagnosed_once_with_the_hosts_cause_first(stack):
    serve, _ = stack
    deadline = time.monotonic() + DIAGNOSED_WITHIN_S

    def diagnosed() -> list[dict]:
        return [a for a in serve.alerts() if a["state"] == "done"]

    wait_for(lambda: len(diagnosed()) == 2, timeout=max(1.0, deadline - time.monotonic()))
    by_host = {a["instance"]: a for a in diagnosed()}
    assert set(by_host) == {"gpu-node-1:9100", "gpu-node-2:9100"}
    first = by_host["gpu-node-1:9100"]
    assert first["alert"] == "HighP99Latency" and first["findings"][0]["id"] == "gpu-throttling"
    assert first["findings"][0]["score"] >= 0.5
    assert all(
        f["id"] != "gpu-throttling" or f["score"] < 0.5 for f in by_host["gpu-node-2:9100"]["findings"]
    )
    page = serve.get(first["report"]).decode()
    assert "Alert HighP99Latency on gpu-node-1:9100" in page and "gpu-throttling" in page
    assert "data:image/png;base64," in page  # the pictures travel inside the page
    report = json.loads(serve.get(first["report"] + ".json"))
    assert report["hypotheses"][0]["id"] == "gpu-throttling"
    latest = serve.get("/latest?alert=HighP99Latency&instance=gpu-node-1%3A9100").decode()
    assert latest == page  # what diagnose alerts's rules link: the newest report of that alert on that host
    index = serve.get("/").decode()
    assert "gpu-throttling" in index and first["report"] in index
    # Alertmanager sends the group again every few seconds: the same incidents, no second diagnosis.
    wait_for(lambda: serve.log.read_text().count("already seen") >= 2, timeout=30)
    assert len(serve.alerts()) == 2
    assert serve.log.read_text().count("diagnosing HighP99Latency") == 2
    with Archive(serve.folder / "archive.sqlite", create=False) as archive:
        labels = sorted(entry.label for entry in archive.entries())
    assert labels == ["alert HighP99Latency gpu-node-1:9100", "alert HighP99Latency gpu-node-2:9100"]
    assert TOKEN not in serve.log.read_text()


def test_a_service_killed_mid_queue_finishes_every_accepted_alert_when_started_again(stack, tmp_path):
    _, prometheus = stack
    serve = Serve(tmp_path, prometheus, free_port(), "--workers", "1")
    serve.start()
    # The alerts started 30 s ago: the stack (this worker's, if the suite's workers split the module) must
    # have scraped both hosts since before that, or there is nothing in their windows to diagnose.
    wait_for(lambda: _scraped_seconds(prometheus) >= 40, timeout=90)
    started = time.time() - 30
    alerts = [
        {
            "status": "firing",
            "labels": {"alertname": "Replayed", "instance": f"gpu-node-{1 + i % 2}:9100", "n": str(i)},
            "annotations": {},
            "startsAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started + i)),
            "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": "",
            "fingerprint": f"{i:016x}",
        }
        for i in range(4)
    ]
    body = {"version": "4", "status": "firing", "receiver": "diagnose", "groupKey": "{}", "alerts": alerts}
    try:
        assert [a["outcome"] for a in serve.post(body)["alerts"]] == ["queued"] * 4
        wait_for(lambda: any(a["state"] == "done" for a in serve.alerts()), timeout=90)
        workers = psutil.Process(serve.process.pid).children(recursive=True)
        serve.stop(signal.SIGKILL)  # no goodbye: what it was doing is left "running" in its store
        # Its worker processes end with it, not waiting for ever on a queue nobody writes to.
        wait_for(lambda: all(map(_gone, workers)), timeout=30)
        serve.start()
        wait_for(lambda: all(a["state"] == "done" for a in serve.alerts()), timeout=150)
        assert len(serve.alerts()) == 4
        assert "queued again" in serve.log.read_text() or serve.log.read_text().count("diagnosing") == 4
    finally:
        serve.stop()


def test_alerts_reads_the_histograms_buckets_from_the_prometheus_that_scrapes_the_service(stack, tmp_path):
    """The fake hosts' latency histogram has buckets of 0.1 and 0.25 s: the baseline's P99 (0.2 s, as the
    requests say) is what histogram_quantile makes of those two buckets, not the exact one."""
    _, prometheus = stack
    query = "match[]=vllm:e2e_request_latency_seconds_bucket"
    wait_for(
        lambda: (
            len(
                json.loads(urllib.request.urlopen(f"{prometheus}/api/v1/label/le/values?{query}").read())[
                    "data"
                ]
            )
            == 3
        ),
        timeout=30,
    )
    start = time.time() - 3600
    rows = [f"{start + i * 0.5:.3f},{i},{200 + (i % 7) * 5}" for i in range(7200)]
    (tmp_path / "requests.csv").write_text("ts,id,latency_ms\n" + "\n".join(rows) + "\n")
    (tmp_path / "manifest.yaml").write_text("format: diagnose-dump/1\nhost: gpu-node-1\ninterval_s: 1.0\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "diagnose",
            "alerts",
            str(tmp_path),
            "--engine",
            "vllm",
            "--prometheus",
            prometheus,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "p99_latency: 2 buckets of vllm:e2e_request_latency_seconds_bucket" in done.stderr
    assert "ttft_p99: no buckets found" in done.stderr
    assert "2 buckets as Prometheus sees it" in done.stdout  # the rule says how its threshold was set
    import yaml

    (rule,) = [
        r for r in yaml.safe_load(done.stdout)["groups"][0]["rules"] if r["alert"] == "DiagnoseP99LatencyHigh"
    ]
    # every window's exact P99 is 230 ms; Prometheus's line across (100, 250] ms puts it at 248.5 ms, in
    # every window alike: no spread, so 1 % of it is taken as one, and the threshold 4 of those above
    assert float(rule["expr"].rsplit(" ", 1)[1]) == pytest.approx(248.5 * 1.04, abs=0.1)
