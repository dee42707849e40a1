"""``diagnose verify``: the read-only checks of a hypothesis's rule, run against a host the test makes
(its crontabs under a folder, its commands, NVML's rows and the engine's /metrics faked at the Host
boundary), and what each says of the hypothesis."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from diagnose.collectors.identity import HostIdentity, compare, this_host
from diagnose.verify import Host, verify
from diagnose.verify.render import render
from diagnose.verify.schedules import cron_period_s, crontab_lines, systemd_timers
from tests.conftest import DUMPS


def _host(tmp_path, crontab: str = "", commands: dict | None = None, gpus=None, metrics: str | None = None):
    (tmp_path / "etc").mkdir(parents=True, exist_ok=True)
    (tmp_path / "etc" / "crontab").write_text(crontab, encoding="utf-8")
    answers = commands or {}

    def fetch(url: str, timeout_s: float) -> str:
        if metrics is None:
            raise OSError("connection refused")
        return metrics

    def gpu_rows():
        if gpus is None:
            from diagnose.collectors.gpu import NvmlUnavailable

            raise NvmlUnavailable("no GPU can be read: NVML says NVML Shared Library Not Found")
        return gpus

    return Host(
        tmp_path,
        lambda argv, timeout: answers.get(argv[0]),
        fetch,
        gpu_rows,
        sleep=lambda s: None,
        identity=lambda: HostIdentity("gpu-node-7"),  # the host the fixtures were recorded on
    )


def _only(found, cause):
    (item,) = [v for v in found.verified if v.cause == cause]
    return item


def test_the_jobs_crontab_line_confirms_co_located_contention(tmp_path):
    """The contender the dump names is python3 /opt/jobs/refresh_features.py, every 241 s."""
    crontab = "SHELL=/bin/sh\n*/4 * * * * root python3 /opt/jobs/refresh_features.py --upload\n"
    found = verify(str(DUMPS / "co-located-contention"), host=_host(tmp_path, crontab))
    item = _only(found, "co-located-contention")
    check, running_now = item.checks  # the second reads /proc, which this host has not got
    assert check.outcome == "confirms" and "refresh_features.py" in check.says
    assert running_now.outcome == "not run"
    assert item.verified_score == pytest.approx(1 - (1 - item.score) * 0.5)


def test_a_schedule_at_the_jobs_period_confirms_it_too_and_none_leaves_it_unconfirmed(tmp_path):
    by_period = "*/4 * * * * root /usr/local/bin/rotate-features\n"  # 240 s against 241 s: within 15 %
    found = verify(str(DUMPS / "co-located-contention"), host=_host(tmp_path, by_period))
    assert _only(found, "co-located-contention").checks[0].outcome == "confirms"
    unrelated = "0 3 * * * root /sbin/e2scrub_all\n"
    found = verify(str(DUMPS / "co-located-contention"), host=_host(tmp_path / "b", unrelated))
    item = _only(found, "co-located-contention")
    assert item.checks[0].outcome == "inconclusive" and item.verified_score == item.score


def test_nvml_now_confirms_or_refutes_throttling_and_without_nvml_says_why(tmp_path):
    hot = [{"gpu": 0, "util_pct": 92, "sm_clock_mhz": 1190, "max_sm_clock_mhz": 1980,
            "throttle_reasons": "sw_thermal_slowdown"}]  # fmt: skip
    item = _only(verify(str(DUMPS / "gpu-throttling"), host=_host(tmp_path, gpus=hot)), "gpu-throttling")
    assert item.checks[0].outcome == "confirms" and "GPU 0: sw_thermal_slowdown" in item.checks[0].says
    assert item.verified_score > item.score
    cool = [{"gpu": 0, "util_pct": 92, "sm_clock_mhz": 1980, "max_sm_clock_mhz": 1980, "throttle_reasons": 0}]
    item = _only(verify(str(DUMPS / "gpu-throttling"), host=_host(tmp_path, gpus=cool)), "gpu-throttling")
    assert item.checks[0].outcome == "refutes" and item.verified_score == pytest.approx(item.score * 0.6)
    item = _only(verify(str(DUMPS / "gpu-throttling"), host=_host(tmp_path)), "gpu-throttling")
    assert item.checks[0].outcome == "not run" and "NVML Shared Library Not Found" in item.checks[0].source
    assert item.verified_score == item.score


def test_the_engines_preemptions_now_confirm_kv_cache_pressure(tmp_path):
    metrics = (
        "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 48\n"
        "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 7\n"
        "# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc 0.99\n"
        "# TYPE vllm:num_preemptions_total counter\nvllm:num_preemptions_total 312\n"
    )
    host = _host(tmp_path, metrics=metrics)
    found = verify(str(DUMPS / "kv-cache-pressure"), host=host, metrics_url="http://127.0.0.1:8000/metrics")
    check = _only(found, "kv-cache-pressure").checks[0]
    assert check.outcome == "confirms" and "312 preemptions" in check.says and "99%" in check.says
    found = verify(str(DUMPS / "kv-cache-pressure"), host=host)  # the fixture names no endpoint
    assert _only(found, "kv-cache-pressure").checks[0].outcome == "not run"


def test_a_healthy_dump_has_nothing_to_confirm(tmp_path, run_cli, monkeypatch):
    found = verify(str(DUMPS / "healthy-steady"), host=_host(tmp_path, "*/4 * * * * root /opt/x.py\n"))
    assert found.verified == ()
    code, out, _ = run_cli("verify", DUMPS / "healthy-steady", "--format", "json")
    assert code == 0 and json.loads(out)["verified"] == []
    code, _, err = run_cli("verify", tmp_path / "nothing-here")
    assert code == 2 and "no such file or folder" in err


def test_the_runner_up_is_verified_beside_the_likely_ones_and_a_rule_without_checks_says_so(tmp_path):
    found = verify(str(DUMPS / "kv-cache-pressure"), host=_host(tmp_path))
    assert [v.cause for v in found.verified] == ["kv-cache-pressure", "queue-saturation"]
    (queue,) = _only(found, "queue-saturation").checks
    assert queue.outcome == "not run" and "no metrics endpoint" in queue.source
    named = verify(str(DUMPS / "kv-cache-pressure"), causes=["oversized-batch"], host=_host(tmp_path))
    assert _only(named, "oversized-batch").note == "its rule lists no check a program can run"


def test_cron_fields_give_a_period_only_where_they_repeat_evenly():
    assert cron_period_s("*/5 * * * *".split()) == 300
    assert cron_period_s("15 * * * *".split()) == 3600
    assert cron_period_s("0,20,40 * * * *".split()) == 1200
    assert cron_period_s("0 */6 * * *".split()) == 6 * 3600
    assert cron_period_s("0 3 * * *".split()) == 86400
    assert cron_period_s("0,10,45 * * * *".split()) is None
    assert cron_period_s("0 3 * * 1".split()) is None
    lines = crontab_lines(
        "# m h dom mon dow\nMAILTO=x\n@hourly /bin/a\n*/2 * * * * /bin/b --c\n", "mine", False
    )
    assert [(s.period_s, s.command) for s in lines] == [(3600, "/bin/a"), (120, "/bin/b --c")]


def test_systemd_timers_period_is_from_their_last_run_to_their_next():
    text = (
        "NEXT                        LEFT       LAST                        PASSED  UNIT              ACTIVATES\n"
        "Sat 2026-12-05 01:15:00 UTC 4min left  Sat 2026-12-05 01:10:00 UTC 48s ago features.timer    "
        "features.service\n"
        "-                           -          -                           -       once.timer        once.service\n"
    )
    timers = systemd_timers(text)
    assert [(t.text, t.period_s, t.command) for t in timers] == [
        ("features.timer", 300, "features.service"),
        ("once.timer", None, "once.service"),
    ]


@pytest.mark.parametrize(
    ("check", "error"),
    [
        (
            "probe: shell\n    confirms: live.gpu.slowing_now",
            "unknown probe 'shell' (one of: engine_metrics,",
        ),
        (
            "probe: schedules\n    confirms: live.gpu.slowing_now",
            "'live.gpu.slowing_now' is not given by the probe",
        ),
        ("probe: gpu_clocks\n    confirms: live.gpu.hot", "unknown fact 'live.gpu.hot'"),
    ],
)
def test_a_check_may_name_only_a_built_in_probe_and_the_facts_it_gives(tmp_path, check, error):
    from diagnose.errors import RuleError
    from diagnose.judge.rules import load_rule_file

    path = tmp_path / "r.yaml"
    path.write_text(
        "id: gpu-throttling\ntitle: t\nsummary: s\nwhen: hot\n"
        "conditions:\n  hot:\n    if: gpu.temp_c.max > 80\n    weight: 0.5\n    evidence: e\n"
        f"checks:\n  now:\n    {check}\n    weight: 0.4\n    says: s\n"
        "verify: [v]\nremedy: [r]\npitfalls: [p]\n",
        encoding="utf-8",
    )
    with pytest.raises(RuleError, match=error.replace("(", r"\(")):
        load_rule_file(path)


def _pages(tmp_path, *pages: str) -> Host:
    """A host whose /metrics answers each page in turn (the probe scrapes twice, five seconds apart)."""
    answers = iter(pages)
    return Host(
        tmp_path,
        lambda argv, timeout: None,
        lambda url, timeout: next(answers),
        sleep=lambda s: None,
        identity=lambda: HostIdentity("gpu-node-7"),
    )


def _vllm(running: int, generated: float, prompt: float) -> str:
    return (
        f"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running {running}\n"
        f"# TYPE vllm:generation_tokens counter\nvllm:generation_tokens_total {generated}\n"
        f"# TYPE vllm:prompt_tokens counter\nvllm:prompt_tokens_total {prompt}\n"
    )


def test_requests_running_and_no_token_in_five_seconds_confirm_a_stall_in_progress(tmp_path):
    url = "http://127.0.0.1:8000/metrics"
    stuck = _pages(tmp_path, _vllm(19, 90_000, 40_000), _vllm(19, 90_000, 40_000))
    found = verify(str(DUMPS / "engine-stall"), host=stuck, metrics_url=url)
    (check,) = _only(found, "engine-stall").checks
    assert check.outcome == "confirms" and "19 requests running" in check.says
    generating = _pages(tmp_path, _vllm(19, 90_000, 40_000), _vllm(19, 91_200, 40_000))
    (check,) = _only(
        verify(str(DUMPS / "engine-stall"), host=generating, metrics_url=url), "engine-stall"
    ).checks
    assert check.outcome == "inconclusive"  # a stall that has passed is not refuted by tokens now
    prefilling = _pages(tmp_path, _vllm(19, 90_000, 40_000), _vllm(19, 90_000, 72_000))
    (check,) = _only(
        verify(str(DUMPS / "engine-stall"), host=prefilling, metrics_url=url), "engine-stall"
    ).checks
    assert check.outcome == "inconclusive"  # a long prompt prefilled is progress


def test_a_service_of_its_own_is_read_with_the_map_it_was_recorded_with(tmp_path):
    """The recorder keeps --metrics-map in the manifest; verify reads the endpoint the same way."""
    import shutil

    import yaml

    dump = tmp_path / "dump"
    shutil.copytree(DUMPS / "queue-saturation-engine-gauges", dump)
    manifest = yaml.safe_load((dump / "manifest.yaml").read_text(encoding="utf-8"))
    manifest["sources"] = {
        "metrics": {
            "kind": "metrics endpoint",
            "target": "http://127.0.0.1:9000/metrics",
            "status": "ok",
            "map": {"app_queue_size": "queue_depth", "app_in_flight": "running"},
        }
    }
    (dump / "manifest.yaml").write_text(yaml.safe_dump(manifest), encoding="utf-8")

    def page(waiting: int) -> str:
        return f"# TYPE app_queue_size gauge\napp_queue_size {waiting}\n# TYPE app_in_flight gauge\napp_in_flight 48\n"

    found = verify(str(dump), host=_pages(tmp_path, page(52), page(61)))
    (check,) = _only(found, "queue-saturation").checks
    assert check.outcome == "confirms" and "61 requests waiting now, 9 more" in check.says
    found = verify(str(dump), host=_pages(tmp_path, page(61), page(40)))
    assert (
        _only(found, "queue-saturation").checks[0].outcome == "inconclusive"
    )  # draining: load may have dropped
    unmapped = verify(
        str(dump),
        host=_pages(tmp_path, "# TYPE x gauge\nx 1\n", "# TYPE x gauge\nx 1\n"),
        metrics_map={"app_queue_size": "queue_depth"},
    )
    assert _only(unmapped, "queue-saturation").checks[0].outcome == "inconclusive"


def test_the_recorder_keeps_the_metrics_map_in_the_manifest_for_verify():
    from diagnose.collectors.sources import SourceHealth

    health = SourceHealth(lambda text: None)
    health.add("metrics", "metrics endpoint", "http://127.0.0.1:9000/metrics", {"map": {"q": "queue_depth"}})
    health.update("metrics", 0.0, None)
    entry = health.manifest()["metrics"]
    assert entry["map"] == {"q": "queue_depth"} and entry["status"] == "ok"


def test_a_dump_recorded_on_another_host_is_not_verified_and_the_report_says_why(tmp_path):
    laptop = replace(_host(tmp_path), identity=lambda: HostIdentity("laptop"))
    found = verify(str(DUMPS / "co-located-contention"), host=laptop)
    assert found.verified == () and found.probes == ()
    assert found.host == "the dump was recorded on gpu-node-7, and this host is laptop"
    assert "none ran (--here-anyway runs them)" in (found.not_run or "")
    said = json.loads(render(found, "json"))
    assert said["not_run"] == found.not_run and said["verified"] == []
    assert render(found, "text").splitlines()[3].startswith("Nothing was checked: the dump was recorded on")
    anyway = verify(str(DUMPS / "co-located-contention"), host=laptop, here_anyway=True)
    assert anyway.verified and anyway.not_run is None


@pytest.mark.parametrize(
    ("recorded", "here", "same", "said"),
    [
        (HostIdentity("a", "m1", "b1"), HostIdentity("a", "m1", "b1"), True, "recorded on this machine"),
        (HostIdentity("a", "m1", "b1"), HostIdentity("renamed", "m1", "b2"), True, "restarted since"),
        (HostIdentity("a", "m1"), HostIdentity("a", "m2"), False, "another machine (a)"),
        (HostIdentity("a"), HostIdentity("b", "m2"), False, "recorded on a, and this host is b"),
        (HostIdentity(None), HostIdentity("b", "m2"), None, "does not say which host"),
    ],
)
def test_the_host_is_told_by_its_machine_id_first_then_its_name(recorded, here, same, said):
    found = compare(recorded, here)
    assert found.same is same and said in found.reason


def test_a_recording_keeps_the_machine_and_boot_it_was_made_on(tmp_path):
    from diagnose.collectors.writer import DumpWriter

    writer = DumpWriter(tmp_path / "dump", interval_s=1.0)
    here = this_host()
    assert writer.manifest["host"] == here.host
    assert {k: writer.manifest.get(k) for k in here.manifest_fields()} == here.manifest_fields()


def test_the_text_wraps_to_the_terminal_and_keeps_each_line_whole_into_a_pipe(tmp_path):
    found = verify(str(DUMPS / "co-located-contention"), host=_host(tmp_path, "*/4 * * * * root /opt/x.py\n"))
    narrow = render(found, "text", 70)
    # a line runs past 70 columns only where one word (a path) is too long to fit on any line
    over = [line for line in narrow.splitlines() if len(line) > 70]
    assert all(any(len(word) > 60 for word in line.split()) for line in over), over
    assert len(narrow.splitlines()) > len(render(found, "text").splitlines())
    whole = render(found, "text")
    assert max(len(line) for line in whole.splitlines()) > 70
    assert " ".join(narrow.split()) == " ".join(whole.split())  # the same words, only wrapped
