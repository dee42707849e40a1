"""diagnose serve's parts that need no Prometheus: the webhook's checks, the queue, the web answers.

The end-to-end loop with a real Prometheus and Alertmanager is in
tests/test_serve_alertmanager.py.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest
from starlette.testclient import TestClient

from diagnose.pull import Auth
from diagnose.serve import ServeConfig, Settings, make_app
from diagnose.serve.queue import MAX_ATTEMPTS, AlertQueue, Outcome, QueueFull, State
from diagnose.serve.webhook import WebhookError, read_notification
from tests.helpers.service import free_port

TOKEN = "s3cret-token-for-tests"


def alert(fingerprint="3f2a9c1d0b7e4a55", status="firing", start="2026-12-06T15:49:35.123456789Z", **labels):
    return {
        "status": status,
        "labels": {"alertname": "HighP99Latency", "instance": "gpu-node-7:9100", **labels},
        "annotations": {"summary": "P99 above 500 ms"},
        "startsAt": start,
        "endsAt": "0001-01-01T00:00:00Z" if status == "firing" else "2026-12-06T16:10:00Z",
        "generatorURL": "http://prometheus:9090/graph?g0.expr=...",
        "fingerprint": fingerprint,
    }


def notification(*alerts, status="firing"):
    return {
        "version": "4",
        "groupKey": '{}:{alertname="HighP99Latency"}',
        "truncatedAlerts": 0,
        "status": status,
        "receiver": "diagnose",
        "groupLabels": {"alertname": "HighP99Latency"},
        "commonLabels": {},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager:9093",
        "alerts": list(alerts),
    }


def test_alertmanagers_body_is_read_with_its_times_and_its_incident_key():
    read = read_notification(json.dumps(notification(alert())).encode())
    (first,) = read.alerts
    assert first.name == "HighP99Latency" and first.ends_at is None
    assert first.key == "3f2a9c1d0b7e4a55-20261206T154935Z"
    assert first.labels["instance"] == "gpu-node-7:9100"
    resolved = read_notification(json.dumps(notification(alert(status="resolved"))).encode()).alerts[0]
    assert resolved.key == first.key and resolved.ends_at is not None  # the same incident, now ended


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"{not json", "not JSON: line 1, column 2"),
        (b"[]", "expected a JSON object"),
        (json.dumps({**notification(alert()), "version": "3"}).encode(), "version: expected '4'"),
        (json.dumps({**notification(), "alerts": {}}).encode(), "alerts: expected a list"),
        (json.dumps(notification({**alert(), "startsAt": "yesterday"})).encode(), "alerts[0].startsAt"),
        (json.dumps(notification({**alert(), "startsAt": "2026-12-06T15:49:35"})).encode(), "has no zone"),
        (json.dumps(notification({**alert(), "fingerprint": "../../etc"})).encode(), "alerts[0].fingerprint"),
        (json.dumps(notification({**alert(), "labels": {"a": 1}})).encode(), "alerts[0].labels"),
        (json.dumps(notification({**alert(), "status": "pending"})).encode(), "expected one of firing"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_a_body_that_is_not_the_webhook_is_refused_naming_the_field(body, said):
    with pytest.raises(WebhookError, match=said.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")):
        read_notification(body)


def _alerts(*bodies):
    read = read_notification(json.dumps(notification(*bodies)).encode())
    return [(a, a.labels["instance"]) for a in read.alerts]


def test_the_queue_diagnoses_an_incident_once_keeps_a_resolved_one_and_refuses_past_its_bound(tmp_path):
    queue = AlertQueue(tmp_path / "alerts.sqlite", bound=2)
    assert queue.accept(_alerts(alert("a1"), alert("a1"))) == [Outcome.QUEUED, Outcome.SEEN]
    assert queue.accept(_alerts(alert("a1"))) == [Outcome.SEEN]  # the group re-sent
    assert queue.accept(_alerts(alert("a1", start="2026-12-06T18:00:00Z"))) == [Outcome.QUEUED]  # a new start
    assert queue.accept(_alerts(alert("r1", status="resolved"))) == [Outcome.KEPT]
    with pytest.raises(QueueFull, match="2 alerts wait"):
        queue.accept(_alerts(alert("b1"), alert("a1")))
    assert queue.entry("b1-20261206T154935Z") is None  # refused whole: nothing of it kept
    counts = queue.counts()
    assert counts[State.QUEUED] == 2 and counts[State.RESOLVED] == 1
    job = queue.claim()
    assert job is not None and job.key == "a1-20261206T154935Z" and job.instance == "gpu-node-7:9100"
    queue.finish(job.key, str(tmp_path / "r"), [{"id": "gpu-throttling", "score": 0.9}])
    entry = queue.entry(job.key)
    assert entry is not None and entry.state is State.DONE and entry.findings[0]["id"] == "gpu-throttling"
    assert queue.accept(_alerts(alert("a1", status="resolved"))) == [Outcome.SEEN]
    assert queue.entry(job.key).ends_at is not None  # the end is kept, the diagnosis not redone


def test_what_a_stop_interrupted_is_queued_again_but_not_forever(tmp_path):
    path = tmp_path / "alerts.sqlite"
    AlertQueue(path, 10).accept(_alerts(alert("a1")))
    for attempt in range(1, MAX_ATTEMPTS + 1):
        queue = AlertQueue(path, 10)  # a new process: the file is all there is
        job = queue.claim()
        assert job is not None and queue.claim() is None
        assert queue.recover() == (1 if attempt < MAX_ATTEMPTS else 0)
    entry = AlertQueue(path, 10).entry("a1-20261206T154935Z")
    assert entry.state is State.FAILED and "stopped 3 times" in entry.problem


@pytest.fixture
def client(tmp_path):
    closed = free_port()  # nothing listens there: an accepted alert fails its pull, quickly
    settings = Settings(prometheus=f"http://127.0.0.1:{closed}", reports=tmp_path / "reports", timeout_s=2)
    config = ServeConfig(
        settings, tmp_path / "alerts.sqlite", (Auth(bearer_token=TOKEN),), workers=1, max_body_bytes=4096
    )
    with TestClient(make_app(config)) as client:
        yield client


def _post(client, body, token=TOKEN, **headers):
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return client.post("/alerts", content=body, headers=headers)


def test_each_bad_request_gets_its_4xx_with_the_reason_logged_and_the_service_keeps_serving(client, caplog):
    caplog.set_level(logging.WARNING, logger="diagnose.serve")
    good = json.dumps(notification(alert())).encode()
    refused = {
        "no token": (_post(client, good, token=None), 401, "no credentials"),
        "wrong token": (_post(client, good, token="guess"), 401, "wrong credentials"),
        "too large": (_post(client, b"x" * 5000), 413, "larger than 4096 bytes"),
        "malformed": (_post(client, b'{"version": "4", '), 400, "not JSON"),
        "no instance": (
            _post(client, json.dumps(notification({**alert(), "labels": {"alertname": "X"}})).encode()),
            422,
            "has no 'instance' label",
        ),
    }
    for what, (answer, status, reason) in refused.items():
        assert answer.status_code == status, what
        assert reason in answer.json()["error"], what
        assert any(reason in record.getMessage() for record in caplog.records), what
    assert client.get("/").status_code == 401 and client.get("/api/alerts").status_code == 401
    assert client.get("/-/healthy").status_code == 200  # a probe needs no credentials
    answer = _post(client, good)
    assert answer.status_code == 200 and answer.json()["alerts"][0]["outcome"] == "queued"
    assert _post(client, good).json()["alerts"][0]["outcome"] == "already seen"
    assert TOKEN not in caplog.text


def test_a_mixed_group_diagnoses_the_alerts_that_name_a_host_and_says_which_it_skipped(client):
    body = notification(alert("a1"), {**alert("b2"), "labels": {"alertname": "Other"}})
    answer = _post(client, json.dumps(body).encode())
    assert answer.status_code == 200
    assert [a["outcome"] for a in answer.json()["alerts"]] == ["queued"]
    assert "alerts[1] (Other) has no 'instance' label" in answer.json()["skipped"][0]


def test_a_report_address_that_is_not_one_is_a_404_never_a_path(client):
    headers = {"Authorization": f"Bearer {TOKEN}"}
    for name in ("..%2F..%2Fetc%2Fpasswd", "a1-20261206T154935Z.txt", "nothing-here"):
        assert client.get(f"/reports/{name}", headers=headers).status_code == 404
    assert "no such alert" in client.get("/reports/a1-20261206T154935Z", headers=headers).json()["error"]


def test_serve_refuses_to_start_without_credentials_or_with_a_bad_address(tmp_path):
    def serve(*args):
        return subprocess.run(
            [sys.executable, "-m", "diagnose", "serve", "--prometheus", "http://127.0.0.1:9", *args],
            capture_output=True,
            text=True,
            timeout=60,
        )

    none = serve("--data", str(tmp_path / "d"))
    assert none.returncode == 2 and "answers only authenticated requests" in none.stderr
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    bad = serve("--data", str(tmp_path / "d"), "--token-file", str(token), "--listen", "9177")
    assert bad.returncode == 2 and "--listen: expected HOST:PORT" in bad.stderr
    assert "Traceback" not in none.stderr + bad.stderr


def test_the_shipped_unit_deployment_and_receiver_are_what_serve_and_alertmanager_read():
    import configparser
    import shlex
    from pathlib import Path

    import yaml

    from diagnose.cli import _parser

    root = Path(__file__).resolve().parents[1] / "collectors"
    unit = (root / "systemd" / "diagnose-serve.service").read_text().replace("\\\n", " ")
    sections = configparser.ConfigParser(interpolation=None, strict=False)
    sections.read_string(unit)
    program, *args = shlex.split(sections["Service"]["ExecStart"].replace("%d", "/run/credentials/x"))
    documents = list(yaml.safe_load_all((root / "kubernetes" / "serve-deployment.yaml").read_text()))
    (deployment,) = [d for d in documents if d["kind"] == "Deployment"]
    (service,) = [d for d in documents if d["kind"] == "Service"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    for given in (args, container["args"]):
        parsed = _parser().parse_args(given if given[0] == "serve" else given)
        assert parsed.command == "serve" and parsed.token_file and parsed.listen.endswith(":9177")
    assert program.endswith("diagnose")
    assert service["spec"]["ports"][0]["port"] == 9177
    receiver = yaml.safe_load((root / "systemd" / "alertmanager-receiver.yml").read_text())
    webhook = receiver["receivers"][0]["webhook_configs"][0]
    assert (
        webhook["url"].endswith(":9177/alerts")
        and webhook["http_config"]["authorization"]["credentials_file"]
    )


def test_the_notifier_is_told_what_became_of_each_alert_and_an_alert_that_cannot_be_pulled_says_why(tmp_path):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from tests.helpers.service import wait_for

    posted: list[dict] = []

    class Capture(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            posted.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    notifier = ThreadingHTTPServer(("127.0.0.1", 0), Capture)
    threading.Thread(target=notifier.serve_forever, daemon=True).start()
    closed = free_port()
    settings = Settings(prometheus=f"http://127.0.0.1:{closed}", reports=tmp_path / "reports", timeout_s=2)
    config = ServeConfig(
        settings,
        tmp_path / "alerts.sqlite",
        (Auth(basic=("oncall", "pw")),),
        workers=1,
        notify_url=f"http://127.0.0.1:{notifier.server_address[1]}/hook",
        public_url="http://diagnose-serve:9177",
    )
    try:
        with TestClient(make_app(config)) as client:
            unauthorised = client.get("/")
            assert unauthorised.status_code == 401 and "Basic" in unauthorised.headers["WWW-Authenticate"]
            answer = client.post("/alerts", content=json.dumps(notification(alert())), auth=("oncall", "pw"))
            assert answer.status_code == 200
            wait_for(lambda: bool(posted), timeout=60)
            entry = client.get("/api/alerts", auth=("oncall", "pw")).json()[0]
            assert entry["state"] == "failed" and "cannot connect" in entry["problem"]
            assert "cannot connect" in client.get("/", auth=("oncall", "pw")).text
    finally:
        notifier.shutdown()
    (message,) = posted
    assert message["alert"] == "HighP99Latency" and message["instance"] == "gpu-node-7:9100"
    assert message["report"] is None and "cannot connect" in message["problem"]
