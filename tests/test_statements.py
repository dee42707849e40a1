"""The statement catalogue: every template, as its writer prints it, is found on any line of any file.

Each statement's own test is built from its template (statements/*.yaml): its placeholders filled
with figures of their kind, the line put behind the prefixes real logs carry (a logger's, a
container's, Ray's, a rank's), cut after its head, quoted. Where a real field sample holds the line,
tests/test_statement_samples.py finds it there.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from diagnose.errors import CatalogueError
from diagnose.statements import EventKind, Finder, builtin_catalogue, load_catalogue, statement_events
from diagnose.statements.template import MIN_HEAD, Kind, Style, compile_template, fill
from tests.conftest import ROOT

CATALOGUE = builtin_catalogue()
FINDER = Finder(CATALOGUE)

# The writers whose messages state a cause, as issue 57 lists them: each has a file of its own.
WRITERS = (
    "vllm",
    "sglang",
    "tgi",
    "triton",
    "tensorrt-llm",
    "llama-cpp",
    "pytorch",
    "nccl",
    "ray-serve",
    "jax-xla",
    "tensorflow",
    "rocm",
    "nvidia-driver",
)

PREFIXES = (
    "",
    "INFO 05-19 10:13:11 [scheduler.py:1481] ",
    "(VllmWorkerProcess pid=4242) ERROR 05-19 10:13:11 ",
    "2026-06-07T10:59:31.659Z  WARN text_generation_router: ",
    "[2026-06-07 10:59:31 TP3] ",
    "[rank3]:[E606 10:59:31.659000 7 ProcessGroupNCCL.cpp:616] ",
    "llm-7f9c-0 | ",
    "Jun  7 10:59:31 gpu-node-7 kernel: [ 219.470994] ",
    "> ",
)


def _example(statement, pieces: int | None = None) -> tuple[str, dict]:
    """The statement's line with figures drawn by kind, and the figures it must give back; ``pieces``:
    only its first so many pieces."""
    values, expected = [], {}
    for n, (name, kind) in enumerate(zip(statement.figures, statement.compiled.kinds, strict=True)):
        value = {Kind.INT: str(17 + n), Kind.FLOAT: f"{2.5 + n}", Kind.TEXT: f"x{n}q"}[kind]
        values.append(value)
        if name != "_":
            expected[name] = {Kind.INT: 17 + n, Kind.FLOAT: 2.5 + n, Kind.TEXT: f"x{n}q"}[kind]
    return fill(statement.template, statement.style, values, pieces), expected


def test_every_writer_the_issue_names_has_a_catalogue():
    files = {path.stem for path in (ROOT / "statements").glob("*.yaml")}
    assert set(WRITERS) <= files, sorted(set(WRITERS) - files)
    writers = {s.writer for s in CATALOGUE}
    assert len(writers) >= len(WRITERS)


def test_every_statement_says_where_its_writer_writes_it():
    for statement in CATALOGUE:
        assert statement.file and "/" in statement.file or "." in statement.file, statement.id
        assert statement.releases.strip(), statement.id
        assert statement.level.strip(), statement.id


@pytest.mark.parametrize("statement", CATALOGUE, ids=lambda s: s.id)
def test_each_statement_is_found_under_every_prefix_with_its_figures(statement):
    line, figures = _example(statement)
    for prefix in PREFIXES:
        found = list(FINDER.find(f"an unrelated line\n{prefix}{line}\nand another\n"))
        assert found, f"{statement.id} not found in {prefix + line!r}"
        (first,) = found
        assert first.line == 2
        # Another statement may account for more of the line; it must say the same kind of thing.
        assert first.statement.event == statement.event, (statement.id, first.statement.id)
        if first.statement is statement:
            assert first.figures == figures, (prefix, line)


@pytest.mark.parametrize("statement", CATALOGUE, ids=lambda s: s.id)
def test_each_statement_is_found_when_the_paste_cut_it_after_its_head(statement):
    cut, _ = _example(statement, statement.compiled.head)
    found = list(FINDER.find(f"(pid=1) {cut}"))
    assert found and found[0].statement.event == statement.event, (statement.id, cut)


def _cut_in_head(statement) -> bool:
    head = " ".join(_example(statement, 1)[0].split())
    return (
        statement.compiled.head == 1 and len(head) > MIN_HEAD + 3 and head[:MIN_HEAD].strip().count(" ") >= 2
    )


CUT_IN_HEAD = [s for s in CATALOGUE if _cut_in_head(s)]


@pytest.mark.parametrize("statement", CUT_IN_HEAD, ids=lambda s: s.id)
def test_a_line_cut_inside_a_statements_first_words_after_min_head_characters_is_still_found(statement):
    head = " ".join(_example(statement, 1)[0].split())
    line = f"[rank5]:[E602 11:17:52 ProcessGroupNCCL.cpp:632] {head[: MIN_HEAD + 3]}"  # the paste ends there
    found = list(FINDER.find(line))
    cut = head[: MIN_HEAD + 3]
    shared = {s.event for s in CUT_IN_HEAD if " ".join(_example(s, 1)[0].split()).startswith(cut)}
    if shared == {statement.event}:
        assert found and found[0].statement.event == statement.event, (statement.id, line)
    else:  # templates of other events start with the same words: a line cut there says neither
        assert not found, (statement.id, line, shared)
    assert not list(FINDER.find(f"note: {head[: MIN_HEAD - 5]}")), (
        "fewer characters than MIN_HEAD are no statement"
    )


@pytest.mark.parametrize("statement", CATALOGUE, ids=lambda s: s.id)
def test_each_statement_is_found_with_its_words_wrapped_onto_other_spacing(statement):
    line, _ = _example(statement)
    spaced = line.replace(" ", "  ")  # a terminal's padding, a wrap rejoined with two spaces
    found = list(FINDER.find(spaced))
    assert found and found[0].statement.event == statement.event, (statement.id, spaced)


def test_a_statement_inside_a_json_log_record_is_found():
    record = json.dumps({"ts": "2026-06-07T10:59:31Z", "log": "Scheduler watchdog timeout (300 s)"})
    statements = [s for s in CATALOGUE if s.event == EventKind.ENGINE_STALL]
    assert statements
    line, _ = _example(statements[0])
    found = list(FINDER.find(json.dumps({"log": line, "stream": "stderr"}) + "\n" + record))
    assert found and found[0].statement.event == EventKind.ENGINE_STALL


def test_routine_lines_of_a_busy_engine_are_no_statement():
    routine = (
        "INFO 05-19 10:13:11 [loggers.py:118] Engine 000: Avg prompt throughput: 91.0 tokens/s, "
        "Avg generation throughput: 512.5 tokens/s, Running: 12 reqs, Waiting: 0 reqs, "
        "GPU KV cache usage: 41.0%, Prefix cache hit rate: 12.0%\n"
        'INFO:     127.0.0.1:51234 - "POST /v1/completions HTTP/1.1" 200 OK\n'
        "[2026-06-07 10:59:31 TP0] Decode batch. #running-req: 3, #token: 1234, token usage: 0.05, "
        "gen throughput (token/s): 88.10, #queue-req: 0\n"
        "Jun  7 10:59:31 gpu-node-7 kernel: [ 219.4] r8169 0000:05:00.0 eth0: link up\n"
    )
    assert [f.statement.id for f in FINDER.find(routine)] == []


def test_printf_and_format_templates_take_what_their_conversions_print():
    printf = compile_template("preempted %d requests after %.2f s (%s)", Style.PRINTF)
    assert printf.kinds == (Kind.INT, Kind.FLOAT, Kind.TEXT)
    match = printf.pattern.search("x preempted 1,024 requests after 3.50 s (decode)")
    assert match and match.groups() == ("1,024", "3.50", "decode")
    braces = compile_template("usage {usage:.1%} of {{blocks}} in {n:d}", Style.FORMAT)
    assert braces.kinds == (Kind.FLOAT, Kind.INT)
    assert braces.pattern.search("usage 95.5% of {blocks} in 12").groups() == ("95.5", "12")
    assert compile_template("100%% of the cache", Style.PRINTF).pattern.search("100% of the cache")


def test_a_template_without_text_or_with_an_unmatched_brace_is_refused(tmp_path):
    (tmp_path / "bad.yaml").write_text(
        "writer: X\nrepo: x/x\nstatements:\n- {id: x-only, event: engine_stall, template: '%s', style: printf,"
        " figures: [a], file: a.py, releases: main, level: error}\n"
    )
    with pytest.raises(CatalogueError, match=r"bad.yaml: statements\[0\] \(x-only\): .*no literal text"):
        load_catalogue(tmp_path)
    (tmp_path / "bad.yaml").write_text(
        "writer: X\nrepo: x/x\nstatements:\n- {id: x-brace, event: oom, template: 'cache {full', style: format,"
        " figures: [], file: a.py, releases: main, level: error}\n"
    )
    with pytest.raises(CatalogueError, match="unmatched brace"):
        load_catalogue(tmp_path)


def test_a_catalogue_entry_that_names_too_few_figures_or_an_unknown_event_is_refused(tmp_path):
    entry = "{id: x-a, event: %s, template: 'stalled for %%d s in step', style: printf, figures: %s, file: a.py, releases: main, level: error}"
    (tmp_path / "x.yaml").write_text(f"writer: X\nstatements:\n- {entry % ('engine_stall', '[]')}\n")
    with pytest.raises(CatalogueError, match="1 placeholder"):
        load_catalogue(tmp_path)
    (tmp_path / "x.yaml").write_text(f"writer: X\nstatements:\n- {entry % ('stalled', '[seconds]')}\n")
    with pytest.raises(CatalogueError, match="stalled"):
        load_catalogue(tmp_path)


def test_events_take_the_lines_own_time_or_say_they_took_the_files():
    statement = next(s for s in CATALOGUE if s.event == EventKind.ENGINE_STALL)
    line, _ = _example(statement)
    events = statement_events(
        [f"12:00 {line}\n", f"{line}\n"],
        FINDER,
        lambda text: 100.0 if text.startswith("12:00") else None,
        5.0,
    )
    assert [(e["ts"], e["ts_source"], e["line"]) for e in events] == [
        (100.0, "log line", 1),
        (5.0, "file modification time", 2),
    ]
    assert events[0]["statement"] == statement.id and events[0]["kind"] == "engine_stall"


def test_a_line_the_files_importer_read_is_not_made_an_event_twice():
    statement = next(s for s in CATALOGUE if s.event == EventKind.ENGINE_STALL)
    line, _ = _example(statement)
    already = [{"kind": "engine_stall", "message": line.strip(), "ts": 1.0}]
    assert statement_events([f"(pid=3) {line}\n"], FINDER, lambda _: None, 5.0, already) == []


def test_a_stall_stated_in_a_file_no_importer_reads_is_diagnosed(run_cli, tmp_path):
    """An application's own log, with the engine's watchdog line under the application's prefix."""
    stall = next(s for s in CATALOGUE if s.event == EventKind.ENGINE_STALL)
    line, _ = _example(stall)
    (tmp_path / "app.log").write_text(
        "2026-06-07 10:59:01,001 myapp.handler INFO serving request 1\n"
        f"2026-06-07 10:59:31,659 myapp.engine ERROR {line}\n"
        "2026-06-07 10:59:32,001 myapp.handler ERROR request 1 failed\n"
    )
    code, out, err = run_cli("file", tmp_path, "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    assert {"file": "app.log", "importer": "statements", "rows": 1} in report["evidence"]["importers"]
    top = report["hypotheses"][0]
    assert top["id"] == "engine-stall" and top["score"] >= 0.5, top
    assert any(stall.id in source for line in top["evidence"] for source in line["sources"]), top["evidence"]


def test_replicas_slow_to_start_are_a_start_not_a_stall(run_cli, tmp_path):
    """Ray Serve's controller warns of replicas slow to be scheduled or to initialise (a model loading):
    an engine starting, not one in service that stopped making progress."""
    (tmp_path / "serve.log").write_text(
        "(ServeController pid=7) WARNING 2026-06-07 10:59:31,136 controller 7 -- Deployment 'llm' in "
        "application 'app' has 4 replicas that have taken more than 30s to initialize.\n"
        "(ServeController pid=7) WARNING 2026-06-07 10:59:31,246 controller 7 -- Deployment 'llm' in "
        "application 'app' has 2 replicas that have taken more than 30s to be scheduled.\n"
    )
    code, out, err = run_cli("file", tmp_path, "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    assert not [h for h in report["hypotheses"] if h["id"] == "engine-stall" and h["score"] > 0], report
    assert "engine.stalls" not in report["facts"] or report["facts"]["engine.stalls"]["value"] == 0


def test_a_rendezvous_that_cannot_reach_its_store_is_a_start_failing_not_a_stall(run_cli, tmp_path):
    (tmp_path / "rank1.log").write_text(
        "[W1207 10:00:01.000000000 TCPStore.cpp:125] [c10d] TCP client failed to connect/validate to host "
        "10.0.0.5:29500 - retrying (try=3, timeout=1800000ms, delay=2000ms): Connection refused\n" * 4
    )
    code, out, err = run_cli("file", tmp_path, "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    assert not [h for h in report["hypotheses"] if h["id"] == "engine-stall" and h["score"] >= 0.5], report


def test_a_full_kv_cache_stated_by_the_engine_is_kv_cache_pressure(run_cli, tmp_path):
    full = [s for s in CATALOGUE if s.event == EventKind.KV_CACHE_FULL]
    assert full
    line, _ = _example(full[0])
    (tmp_path / "router.log").write_text(f"2026-06-07T10:59:31.659Z  WARN router: {line}\n")
    code, out, err = run_cli("file", tmp_path, "--format", "json")
    assert code == 0, err
    top = json.loads(out)["hypotheses"][0]
    assert top["id"] == "kv-cache-pressure" and top["score"] >= 0.5, top


def test_a_full_queue_stated_by_the_server_is_queue_saturation(run_cli, tmp_path):
    full = [s for s in CATALOGUE if s.event == EventKind.QUEUE_FULL]
    assert {s.writer for s in full} >= {"Ray Serve", "Triton Inference Server"}, {s.writer for s in full}
    line, _ = _example(full[0])
    (tmp_path / "serve.log").write_text(
        f"(ProxyActor pid=21011) WARNING 2026-06-07 10:59:31,659 proxy -- {line}\n"
    )
    code, out, err = run_cli("file", tmp_path, "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    top = report["hypotheses"][0]
    assert top["id"] == "queue-saturation" and top["score"] >= 0.5, top
    assert report["facts"]["engine.queue_full_line"]["value"].endswith(line.strip()[-40:])


def test_the_packaged_catalogue_is_the_clones(tmp_path):
    """A wheel carries statements/ as diagnose/builtin_statements, as it carries rules/."""
    text = (ROOT / "pyproject.toml").read_text()
    assert '"statements" = "diagnose/builtin_statements"' in text
    copy = tmp_path / "statements"
    shutil.copytree(ROOT / "statements", copy)
    assert [s.id for s in load_catalogue(Path(copy))] == [s.id for s in CATALOGUE]


def test_remining_a_source_tree_lists_what_the_catalogue_lacks_and_what_the_tree_no_longer_writes(
    tmp_path, capsys
):
    from statements.remine import main as remine

    tree = tmp_path / "tgi"
    (tree / "server").mkdir(parents=True)
    (tree / "server" / "cache.py").write_text(
        "def allocate(blocks, free):\n"
        "    raise RuntimeError(f'Out of available cache blocks: asked {blocks}, only {len(free)} free blocks')\n"
        "    logger.error('The block manager hung: watchdog gave up on step %d', step)\n"
    )
    assert remine([str(tree), "--writer", "tgi"]) == 0
    out = capsys.readouterr().out
    assert "lacks\tserver/cache.py:3\tThe block manager hung" in out
    assert "server/cache.py:2" not in out  # accounted for by the catalogue
    assert "gone\ttgi-out-of-cache-blocks\t" not in out
    assert "gone\ttgi-shard-terminated\t" in out  # the tree holds no launcher


def test_a_recorded_event_takes_the_kind_its_statement_has_in_the_catalogue_today(tmp_path):
    # Recorded when a request too long for its slot was still counted as a full KV cache: read now as
    # the catalogue reads the line, so the rule that counts full caches does not count it.
    from diagnose.dump import load_dump

    (tmp_path / "manifest.yaml").write_text("host: h\nstart: '2026-12-06T10:00:00Z'\n")
    line = "srv send_error: task id = 20428, error: request (7808 tokens) exceeds the available context size"
    events = [
        {"ts": 1796553750.0, "kind": "kv_cache_full", "message": line,
         "statement": "llama-cpp-request-tokens-exceeds-context"},
        {"ts": 1796553751.0, "kind": "kv_cache_full", "message": "purging slot 2 with 812 tokens",
         "statement": "llama-cpp-purging-slot"},
        {"ts": 1796553752.0, "kind": "restart", "message": "deployed", "statement": "a-users-own-id"},
    ]  # fmt: skip
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    kinds = load_dump(tmp_path).table("events")["kind"].astype(str).tolist()
    assert kinds == ["request_too_long", "kv_cache_full", "restart"]


def test_a_long_name_at_a_lines_end_is_no_statement_cut_short():
    # SGLang's start-up line "max_total_num_tokens=..." cut after its name would be any scrape's HELP line
    assert not list(FINDER.find("# HELP sglang:max_total_num_tokens Maximum total number of tokens"))
    assert not list(FINDER.find("# HELP sglang:max_total_num_tokens"))
