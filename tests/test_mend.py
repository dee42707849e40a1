"""The damage of pasting is undone in one layer, before any importer, and said in the report.

The grammar cases are built here; the real samples under every damage are in
``test_each_real_sample_reads_the_same_under_a_reversible_damage_and_never_wrong_under_any`` (the
fast subset of ``benchmarks/bench_damage.py``).
"""

from __future__ import annotations

import json
import textwrap

import pytest

from diagnose.importers import mend
from tests.conftest import SHARED_DATA
from tests.helpers.damage import DAMAGES, rows, verdict
from tests.helpers.samples import expectation

VLLM_STATS = (
    "INFO 05-19 10:13:{s:02d} [loggers.py:271] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
    "Avg generation throughput: 41.{s} tokens/s, Running: 3 reqs, Waiting: 0 reqs, "
    "GPU KV cache usage: 12.5%, Prefix cache hit rate: 0.0%"
)
SCRAPE = "\n".join(
    [
        "# HELP vllm:num_requests_running Number of requests currently running on GPU.",
        "# TYPE vllm:num_requests_running gauge",
        'vllm:num_requests_running{model_name="llama"} 3.0',
        "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
        "# TYPE vllm:num_requests_waiting gauge",
        'vllm:num_requests_waiting{model_name="llama"} 7.0',
    ]
)


def test_a_clean_text_comes_back_unchanged():
    for text in (SCRAPE, "\n".join(VLLM_STATS.format(s=s) for s in range(5))):
        assert mend(text).text == text
        assert mend(text).undone == ()


def test_process_tags_are_removed_and_kept_as_who_wrote_the_lines():
    lines = [VLLM_STATS.format(s=s) for s in range(3)]
    tagged = "\n".join(f"(EngineCore_3 pid={4000 + i}) {line}" for i, line in enumerate(lines))
    mended = mend(tagged)
    assert mended.text == "\n".join(lines)
    assert mended.undone == ('removed a process tag prefix ("(EngineCore_3 pid=…)") from 3 lines',)
    assert mended.prefixes[0] == "(EngineCore_3 pid=4000)"


def test_a_compose_prefix_needs_most_lines_a_process_tag_does_not():
    scrape = "\n".join(f"vllm-1  | {line}" for line in SCRAPE.split("\n"))
    assert mend(scrape).text == SCRAPE
    # one line starting like a compose prefix is a line, not a prefix
    table = "name | value\n" + SCRAPE
    assert mend(table).text == table


def test_a_markdown_quote_gives_help_and_type_their_hash_back():
    quoted = "\n".join("> " + line.removeprefix("# ") for line in SCRAPE.split("\n"))
    assert mend(quoted).text == SCRAPE


def test_entities_escapes_fences_prompts_and_colour_are_undone():
    damaged = (
        "```\n$ curl -s localhost:8000/metrics\n"
        + SCRAPE.replace('"', "&quot;").replace("_", "\\_").replace("vllm:", "\x1b[1mvllm:")
        + "\n```"
    )
    mended = mend(damaged)
    assert mended.text.replace("\x1b[1m", "") == SCRAPE
    said = " ".join(mended.undone)
    for what in ("HTML entit", "Markdown escape", "code fence", "shell prompt", "colour code"):
        assert what in said


def test_colour_codes_written_out_as_text_are_removed():
    for written in ("#033[", "\\u001b[", "\\x1b[", "\\033[", "^[["):
        damaged = SCRAPE.replace("vllm:", f"{written}1mvllm:").replace(" 7.0", f"{written}0m 7.0")
        mended = mend(damaged)
        assert mended.text == SCRAPE, written
        assert any("written out as text" in what for what in mended.undone)


def test_a_last_line_cut_mid_figure_is_left_out_and_a_complete_one_is_not():
    rows = [f"2024/05/01 10:00:0{s}, 0, {60 + s}.25 %, 81920 MiB" for s in range(5)]
    complete = "\n".join(rows)  # an editor may save the last line without its line end
    assert mend(complete).text == complete
    cut = "\n".join([*rows[:4], rows[4][:-7]])  # "... 64.25 %, 81920 MiB" cut to "... 819"
    mended = mend(cut)
    assert mended.text == "\n".join(rows[:4])
    assert any("left out the last line" in what for what in mended.undone)
    assert mend(cut + "\n").text == cut + "\n"  # a line end says the line is whole, however short


def test_curls_progress_meter_is_removed_even_glued_to_a_line():
    meter = (
        "  % Total    % Received % Xferd  Average Speed   Time    Time     Time  Current\n"
        "                                 Dload  Upload   Total   Spent    Left  Speed\n"
        "100  1234  100  1234    0     0  12345      0 --:--:-- --:--:-- --:--:-- 12345"
    )
    assert mend(meter + SCRAPE).text == SCRAPE


def test_curls_redraws_interleaved_with_the_scrape_leave_it_whole():
    # curl's meter redraws its row with carriage returns; piped through grep, what is left of a
    # redraw stands before the scrape's next comment (curl's tool_progress.c prints sizes and clocks)
    pasted = (
        "  % Total    % Received % Xferd  Average Speed   Time    Time     Time  Current\n"
        "                                 Dload  Upload   Total   Spent    Left  Speed\n"
        "  0     0    0     0    0     0      0      0 --:--:-- --:--100  389k  100  389k    "
        + SCRAPE.split("\n")[0]
        + "\n0 "
        + "\n".join(SCRAPE.split("\n")[1:])
    )
    assert mend(pasted).text == SCRAPE


def test_samples_of_one_width_in_prose_are_not_read_as_a_wrap():
    # labelled samples that happen to be the longest lines of a note, one before a shorter one
    labels = '{gpu="0",UUID="GPU-603a8873",GPU_I_ID="1",pod=""}'
    tensor, dram = (
        f"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{labels} 0.000000",
        f"DCGM_FI_PROF_DRAM_ACTIVE{labels} 0.0",
    )
    note = "\n".join(
        ["Steps:", "1. kubectl rollout restart ds dcgm-exporter", "2. curl 10.10.204.252:9400/metrics", ""]
        + [
            tensor,
            dram,
            "",
            "3. started a benchmark job on the same instance.",
            "4. curl again:",
            "",
            tensor,
            dram,
        ]
    )
    assert mend(note).text == note


def test_rows_a_printer_padded_to_one_width_are_not_a_wrap_even_with_commas_in_them():
    # nsys stats' cuda_gpu_kern_sum rows, padded to the widest name: thousands separators and
    # template arguments hold commas, but the fields are aligned by spaces, not separated by commas
    rows = [
        f"{share:>9}  {total:>15}  {calls:>9}  {name:<60}"
        for share, total, calls, name in [
            ("8.2", "2,143,309,810", "2,596", "void mmq_ids_helper<(int)0>(const int *, int *, int *)"),
            ("6.9", "1,793,200,482", "180", "void flash_attn_mma_ext_f16<(int)256, (int)8, (int)8>"),
            ("5.6", "1,458,343,304", "4,376", "void mul_mat_q<(ggml_type)133, (int)128, (bool)0>"),
        ]
    ]
    table = "\n".join([*rows, "      4.3    1,122,358,207        300  void delta_net"])
    assert mend(table).text == textwrap.dedent(table)


def test_glued_samples_and_log_lines_are_split_where_a_record_starts():
    lines = SCRAPE.split("\n")
    glued = "\n".join([lines[0], lines[1], lines[2] + lines[3], lines[4] + lines[5]])
    assert mend(glued).text == SCRAPE
    log = [VLLM_STATS.format(s=s) for s in range(3)]
    assert mend(log[0] + log[1] + "\n" + log[2]).text == "\n".join(log)


def test_a_hard_wrapped_log_is_rejoined_and_a_fixed_width_table_is_not():
    log = "\n".join(VLLM_STATS.format(s=s) for s in range(4))
    wrapped = "\n".join(line[i : i + 80] for line in log.split("\n") for i in range(0, len(line), 80))
    assert mend(wrapped).text == log
    dmon = "# gpu   pwr  gtemp  mtemp  sm  mem\n# Idx     W      C      C   %    %\n" + "\n".join(
        f"    0    {30 + i:3d}     40      -    {i:2d}   10   " + "0" * 40 for i in range(6)
    )
    assert mend(dmon).text == dmon


def test_a_log_record_broken_at_its_commas_is_rejoined_and_nothing_else_is():
    """An author re-flowed a stats line at its commas into indented pieces: one record again. Prose that
    ends with a comma, pieces that are not indented, and a record after one are left alone."""
    line = VLLM_STATS.format(s=7)
    head, *pieces = line.split(", ")
    broken = "\n".join([head + ",", *(f"    {piece}," for piece in pieces[:-1]), f"    {pieces[-1]}"])
    mended = mend("We see this:\n" + broken + "\n" + VLLM_STATS.format(s=8) + "\nAny idea,\n  anyone?")
    assert mended.text == "\n".join(["We see this:", line, VLLM_STATS.format(s=8), "Any idea,", "  anyone?"])
    assert (
        mended.steps == ("commas",)
        and "rejoined 5 lines of log records broken at their commas" in mended.undone
    )
    flush = "\n".join([head + ",", *(f"{piece}," for piece in pieces)])
    assert mend(flush).text == flush  # not indented: not known to continue it
    two = "\n".join([VLLM_STATS.format(s=1) + ",", "    " + VLLM_STATS.format(s=2)])
    assert mend(two).text == two  # a record is never a piece of another


def test_a_full_width_header_and_row_whose_columns_line_up_are_a_table_not_a_wrap():
    # rocm-smi's Concise Info (rocm_smi.py) is printed 80 columns wide, banners, header and rows alike
    table = (
        "========================ROCm System Management Interface========================\n"
        "================================= Concise Info =================================\n"
        "GPU  Temp (DieEdge)  AvgPwr  SCLK     MCLK     Fan     Perf  PwrCap  VRAM%  GPU%\n"
        "0    61.0c           187.0W  1502Mhz  1200Mhz  40.78%  auto  220.0W   92%   100%\n"
        "1    34.0c           37.0W   800Mhz   350Mhz   0%      auto  220.0W    0%   0%\n"
        "================================================================================\n"
    )
    assert mend(table).text == table
    log = "\n".join(VLLM_STATS.format(s=s) for s in range(4))
    wrapped = "\n".join(line[i : i + 80] for line in log.split("\n") for i in range(0, len(line), 80))
    assert mend(wrapped).text == log  # a wrap's tail starts where the cut fell, not at a column


def test_a_wrapped_csv_is_rejoined_only_where_its_records_then_agree():
    header = "timestamp, index, name, utilization.gpu [%], memory.used [MiB], memory.total [MiB]"
    rows_ = [
        f"2024/05/01 10:00:0{i}.000, {i}, NVIDIA H100 80GB HBM3, {10 * i} %, 1234 MiB, 81559 MiB"
        for i in range(4)
    ]
    table = "\n".join([header, *rows_])
    wrapped = "\n".join(line[i : i + 60] for line in table.split("\n") for i in range(0, len(line), 60))
    assert mend(wrapped).text == table
    assert mend(table).text == table  # rows all one width: a table, not a wrap


def test_json_strings_broken_by_a_hard_wrap_are_joined():
    document = json.dumps({"resourceSpans": [{"resource": {"attributes": [{"key": "service.name"}]}}]})
    wrapped = "\n".join(document[i : i + 30] for i in range(0, len(document), 30))
    assert json.loads(mend(wrapped).text) == json.loads(document)


def test_the_report_says_what_was_undone(tmp_path, report_of):
    tagged = "\n".join(f"(EngineCore_0 pid=91) {VLLM_STATS.format(s=s)}" for s in range(20))
    (tmp_path / "engine.log").write_text(tagged + "\n")
    report = report_of(tmp_path)
    said = (
        'engine.log: read after undoing what pasting did to it: removed a process tag prefix ("(EngineCore_0'
    )
    assert any(w.startswith(said) for w in report["evidence"]["warnings"])
    assert report["evidence"]["importers"][0]["rows"] > 0


SAMPLES = SHARED_DATA / "real-samples"
# The batches the damage grammar was proven on, every sample under every damage. A batch that arrives
# later (field-2026-12-b) is a check, not a specification: benchmarks/bench_damage.py measures it, and
# what it finds is fixed in the grammar, by the format's rules, before its samples join this list.
PROVEN = ("formats", "field-2026-12")


def _samples() -> list:
    """The proven batches' samples that have rows to compare: a look-alike, or a file with nothing the
    dump keeps, is left out at collection (tests/helpers/samples.py says which), never skipped."""
    if not SAMPLES.is_dir():
        return []
    return sorted(
        p
        for batch in PROVEN
        for p in (SAMPLES / batch).rglob("*")
        if p.is_file() and p.name not in ("README.md", "SOURCES.tsv") and expectation(p)[1] == "rows"
    )


@pytest.mark.skipif(not SAMPLES.is_dir(), reason="../shared/data/real-samples is not here")
@pytest.mark.parametrize("sample", _samples(), ids=lambda p: "_".join(p.relative_to(SAMPLES).parts))
def test_each_real_sample_reads_the_same_under_a_reversible_damage_and_never_wrong_under_any(sample):
    text = sample.read_text(encoding="utf-8", errors="replace")
    clean = rows(text, sample.name)
    if not clean[1]:  # a kernel log whose cause is a statement (a GSP heartbeat timeout), not a row
        pytest.skip(
            "no importer's rows: what it holds is found as statements, which this test does not compare"
        )
    for damage in DAMAGES:
        outcome = verdict(clean, damage.apply(text), sample.name)
        assert not outcome.startswith("error"), (damage.name, outcome)
        assert outcome != "different", damage.name  # any damage may lose figures, none may change one
        if damage.reversible:
            assert outcome == "same", damage.name


def test_what_was_undone_in_pieces_adds_up_with_its_noun_as_the_sum_asks():
    """A file read in pieces says "from 1 line" for one piece and "from 3 lines" for the next: one kind,
    said once for the file, "from 4 lines"."""
    import copy

    from diagnose.importers.undone import Undone

    one, three = Undone("removed a prefix from ", 1, "line"), Undone("removed a prefix from ", 3, "line")
    assert (one, three) == ("removed a prefix from 1 line", "removed a prefix from 3 lines")
    assert one.kind == three.kind and one.plus(three) == "removed a prefix from 4 lines"
    entities = Undone("decoded ", 1, "HTML entity", " (&lt;)", "HTML entities")
    assert entities.plus(entities) == "decoded 2 HTML entities (&lt;)"
    assert copy.deepcopy(three).plus(one) == "removed a prefix from 4 lines"  # a copy keeps its parts
