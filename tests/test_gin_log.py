"""Gin's access log (Ollama's, Go gateways') read as gin's defaultLogFormatter writes it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from diagnose.dump import load_dump
from diagnose.importers.base import Source
from diagnose.importers.gin_log import GinAccessLogImporter, _duration_ms

LOG = (
    'Dec 11 09:58:58 quorra ollama[1543654]: [GIN] 2024/12/11 - 09:58:58 | 500 |        29m59s |      10.0.0.123 | POST     "/api/chat"\n'  # noqa: E501
    'Dec 11 09:59:01 quorra ollama[1543654]: [GIN] 2024/12/11 - 09:59:01 | 200 |  4.709180529s |      10.0.0.123 | POST     "/api/chat"\n'  # noqa: E501
    'Dec 11 09:59:02 quorra ollama[1543654]: [GIN] 2024/12/11 - 09:59:02 | 200 |     512.3µs |      10.0.0.123 | GET      "/api/tags"\n'  # noqa: E501
    '[GIN] 2024/12/11 - 09:59:03 |\x1b[97;42m 200 \x1b[0m|    850.12ms |       127.0.0.1 |\x1b[97;46m POST    \x1b[0m "/v1/chat/completions"\n'  # noqa: E501
)


def test_each_post_is_a_request_that_arrived_its_latency_before_the_stamp():
    result = GinAccessLogImporter().read(Source("ollama.log", LOG, 0.0))
    rows = result.tables["requests"]
    assert list(rows["operation"]) == ["POST /api/chat", "POST /api/chat", "POST /v1/chat/completions"]
    assert list(rows["status"]) == ["500", "200", "200"]
    assert rows["latency_ms"].iloc[0] == (29 * 60 + 59) * 1000
    end = datetime(2024, 12, 11, 9, 59, 1, tzinfo=UTC).timestamp()
    assert rows["ts"].iloc[1] == end - 4.709180529  # the stamp is when the answer went out
    assert rows["latency_ms"].iloc[2] == 850.12  # behind the terminal's colours
    assert any("1 GET or HEAD request" in w for w in result.warnings)  # a model list is no inference call


def test_go_durations_in_every_unit_it_prints():
    assert _duration_ms("1h2m3.5s") == 3_723_500
    assert _duration_ms("850µs") == pytest.approx(0.85) and _duration_ms("120ns") == pytest.approx(1.2e-4)
    assert _duration_ms("12 ms") is None  # not how Go prints one


def test_a_folder_with_an_ollama_journal_has_its_requests(tmp_path):
    (tmp_path / "journal.txt").write_text(LOG)
    requests = load_dump(str(tmp_path)).tables["requests"]
    assert len(requests) == 3 and (requests["latency_ms"] > 0).all()


def test_one_gin_line_in_prose_is_not_a_log():
    assert not GinAccessLogImporter().recognise('see [GIN] 2024/12/11 - 09:58:58 | 200 | 4s | x | POST "/"\n')
