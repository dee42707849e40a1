"""The metric catalogue (metrics/): each engine's /metrics names read from its source, and the readers
that use it: an engine told by its names under any spelling, label sets added up (a share's the
largest), a page without TYPE lines read by what the catalogue says each name is."""

from __future__ import annotations

import pytest

from diagnose.dump.schema import COLUMNS
from diagnose.engines.catalogue import MetricType, builtin_metrics, load_metrics_file
from diagnose.engines.metrics import detect_engine, engine_maps, engine_row, parse_samples
from diagnose.errors import CatalogueError


def test_every_metric_says_where_its_writer_defines_it_and_feeds_only_server_columns():
    writers = builtin_metrics()
    assert {"vllm", "sglang", "tgi", "triton", "ray-serve", "kserve", "mindie"} <= {w.engine for w in writers}
    for writer in writers:
        names = [m.name for m in writer.metrics]
        assert len(names) == len(set((m.name, m.label) for m in writer.metrics)), writer.writer
        for metric in writer.metrics:
            assert metric.file and metric.releases, metric.name
            assert set(metric.columns) <= set(COLUMNS["server"]), metric.name
            if metric.per is not None:
                assert metric.type is MetricType.COUNTER


def test_every_engine_map_reads_the_columns_a_queue_needs():
    maps = engine_maps()
    for engine in ("vllm", "sglang", "tgi", "triton"):
        columns = {column for column, _, _ in maps[engine].gauges}
        assert {"queue_depth", "running"} <= columns, engine


def _page(*lines: str) -> str:
    return "\n".join(lines) + "\n"


def test_data_parallel_engines_add_up_their_requests_and_the_fullest_cache_is_the_cache():
    page = _page(
        "# TYPE vllm:num_requests_running gauge",
        'vllm:num_requests_running{engine="0",model_name="m"} 7.0',
        'vllm:num_requests_running{engine="1",model_name="m"} 5.0',
        "# TYPE vllm:kv_cache_usage_perc gauge",
        'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.98',
        'vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.30',
    )
    row = engine_row(engine_maps()["vllm"], 0.0, parse_samples(page))
    assert row["running"] == 12.0
    assert row["kv_cache_usage_pct"] == pytest.approx(98.0)


def test_sglang_ranks_add_up_and_its_sidecars_underscore_names_are_sglangs():
    page = _page(
        'sglang_num_running_reqs{dp_rank="0",tp_rank="0"} 3',
        'sglang_num_running_reqs{dp_rank="1",tp_rank="0"} 4',
        'sglang_token_usage{dp_rank="0",tp_rank="0"} 0.5',
        'sglang_token_usage{dp_rank="1",tp_rank="0"} 0.75',
    )
    samples = parse_samples(page)
    assert detect_engine(samples) == "sglang"
    row = engine_row(engine_maps()["sglang"], 0.0, samples)
    assert (row["running"], row["kv_cache_usage_pct"]) == (7.0, 75.0)


def test_sglangs_pipeline_stages_and_repeating_tp_ranks_count_their_requests_once():
    # every stage sees the same requests, and --enable-metrics-for-all-schedulers repeats each rank's
    # figures: the repeats are one figure; data-parallel groups are two
    page = _page(
        "# TYPE sglang:num_running_reqs gauge",
        *(
            f'sglang:num_running_reqs{{dp_rank="{dp}",pp_rank="{pp}",tp_rank="{tp}"}} {5 + dp}'
            for dp in (0, 1)
            for pp in (0, 1)
            for tp in (0, 1)
        ),
    )
    row = engine_row(engine_maps()["sglang"], 0.0, parse_samples(page))
    assert row["running"] == 11.0


def test_a_triton_page_without_type_lines_still_has_its_counters_rates():
    def page(successes: int, queue_us: int) -> str:
        return _page(
            f'nv_inference_request_success{{model="m",version="1"}} {successes}',
            f'nv_inference_queue_duration_us{{model="m",version="1"}} {queue_us}',
        )

    before, after = parse_samples(page(100, 1_000_000)), parse_samples(page(150, 1_500_000))
    assert detect_engine(after) == "triton"
    row = engine_row(engine_maps()["triton"], 10.0, after, before, elapsed=10.0)
    assert row["throughput_rps"] == 5.0
    assert row["queue_ms"] == pytest.approx(10.0)  # 500,000 µs over 50 requests


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ("{name: x, type: gauge, unit: furlongs, labels: [], help: '', file: f, releases: r}", "furlongs"),
        (
            "{name: x, type: gauge, unit: ratio, labels: [], help: '', file: f, releases: r, per: y}",
            "counter",
        ),
        (
            "{name: x, type: gauge, unit: tokens, labels: [], help: '', file: f, releases: r, column: e2e_ms}",
            "e2e_ms",
        ),
        ("{name: 'bad name', type: gauge, unit: count, labels: [], help: '', file: f, releases: r}", "name"),
        ("{name: x, type: gauge, unit: count, labels: []}", "missing"),
        (
            "{name: x, type: counter, unit: count, labels: [], help: '', file: f, releases: r, gpu_column: temp_c}",
            "only a gauge",
        ),
        (
            "{name: x, type: gauge, unit: seconds, labels: [], help: '', file: f, releases: r, gpu_column: util_pct}",
            "util_pct",
        ),
    ],
)
def test_a_broken_entry_is_an_error_naming_its_file_and_entry(tmp_path, entry, says):
    path = tmp_path / "engine.yaml"
    path.write_text(f"writer: E\nengine: e\nprefix: 'e_'\nmetrics:\n  - {entry}\n")
    with pytest.raises(CatalogueError, match=rf"engine\.yaml: metrics\[0\].*{says}"):
        load_metrics_file(path)


def test_a_wheel_carries_the_catalogue_as_it_carries_the_rules():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    assert '"metrics" = "diagnose/builtin_metrics"' in text


def test_remining_a_source_tree_lists_what_the_catalogue_lacks_and_what_the_tree_no_longer_defines(
    tmp_path, capsys
):
    from metrics.remine import main as remine

    tree = tmp_path / "vllm"
    (tree / "vllm" / "v1" / "metrics").mkdir(parents=True)
    (tree / "vllm" / "v1" / "metrics" / "loggers.py").write_text(
        "self.gauge_scheduler_running = self._gauge_cls(\n"
        '    name="vllm:num_requests_running",\n'
        '    documentation="Number of requests in model execution batches.")\n'
        'self.counter_spec = self._counter_cls(name="vllm:not_a_metric_of_any_release", documentation="...")\n'
    )
    assert remine([str(tree), "--writer", "vllm"]) == 0
    out = capsys.readouterr().out
    assert "lacks\tvllm:not_a_metric_of_any_release\tvllm/v1/metrics/loggers.py:4" in out
    assert "vllm:num_requests_running" not in out  # listed, and defined here
    assert "gone\tvllm:num_requests_waiting\n" in out  # listed, and not in this tree


def test_the_gpu_fields_are_the_catalogues_and_every_reader_of_them_agrees():
    """dcgm-exporter's and Triton's per-GPU gauges are said once, in metrics/: a scrape, a series export
    and pull read each as the same column at the same scale."""
    from diagnose.dump.registry import REGISTERED
    from diagnose.engines.metrics import gpu_fields
    from diagnose.pull.queries import GPU

    dcgm = gpu_fields("dcgm-exporter")
    assert dcgm["DCGM_FI_DEV_FB_USED"] == ("mem_used_bytes", 2**20)
    assert dcgm["DCGM_FI_PROF_SM_ACTIVE"] == ("sm_active_pct", 100.0)
    assert gpu_fields("triton")["nv_gpu_utilization"] == ("util_pct", 100.0)
    assert {column for column, _ in [*dcgm.values(), *gpu_fields("triton").values()]} <= REGISTERED["gpu"]
    pulled = {c.needs: c for c in GPU}
    for name, (column, scale) in dcgm.items():
        query = pulled[(name,)]
        assert query.column == column and (scale == 1 or f"{scale:.17g} * {name}" in query.query), name


def test_a_mig_slice_takes_its_utilisation_from_the_profiling_field_and_a_whole_gpu_from_its_own():
    from diagnose.importers.base import Source
    from diagnose.importers.prometheus_text import PrometheusTextImporter

    scrape = (
        'DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0"} 0.5 1700000000000\n'
        'DCGM_FI_DEV_GPU_UTIL{gpu="0"} 80 1700000000000\n'
        'DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="1",GPU_I_ID="3"} 0.25 1700000000000\n'
    )
    gpu = PrometheusTextImporter().read(Source("dcgm.prom", scrape, 0.0)).tables["gpu"]
    by_slice = {(row.gpu, row.mig_instance if isinstance(row.mig_instance, str) else None): row.util_pct for row in gpu.itertuples()}
    assert by_slice == {(0, None): 80.0, (1, "3"): 25.0}
