"""nvidia-smi's output pasted as a fragment is read from what nvidia-smi documents (issue 57).

People grep one section out of -q (``nvidia-smi -q | grep -A8 'Clocks Event Reasons'``) or copy it
from a longer report: no ``==NVSMI LOG==`` banner, no ``GPU 00000000:…`` line. The layouts here are
-q's as nvidia-smi documents them, in both generations of the section's name. A ``--query-gpu`` loop
run with ``--format=csv,noheader`` has no header: the command line names its columns.
"""

from __future__ import annotations

import pytest

from diagnose.dump import load_dump

OLD = """$ nvidia-smi -q | grep -A8 'Clocks Throttle'
    Clocks Throttle Reasons
        Idle                        : Not Active
        Applications Clocks Setting : Not Active
        SW Power Cap                : Active
        HW Slowdown                 : Not Active
            HW Thermal Slowdown     : Not Active
            HW Power Brake Slowdown : Not Active
        Sync Boost                  : Not Active
        SW Thermal Slowdown         : Not Active
"""
NEW = """    Clocks Event Reasons
        Idle                                   : Not Active
        Applications Clocks Setting            : Not Active
        SW Power Cap                           : Not Active
        HW Slowdown                            : Active
            HW Thermal Slowdown                : Not Active
            HW Power Brake Slowdown            : Active
        Sync Boost                             : Not Active
        SW Thermal Slowdown                    : Not Active
        Display Clock Setting                  : Not Active
    Clocks
        Graphics                               : 382 MHz
        SM                                     : 382 MHz
        Memory                                 : 2619 MHz
"""


@pytest.mark.parametrize(
    ("text", "reasons", "clock"),
    [(OLD, "sw_power_cap", None), (NEW, "hw_slowdown;hw_power_brake_slowdown", 382)],
    ids=["throttle-reasons", "event-reasons-and-clocks"],
)
def test_a_section_alone_gives_its_gpus_reasons_and_clocks(tmp_path, text, reasons, clock):
    (tmp_path / "q.txt").write_text(text)
    dump = load_dump(str(tmp_path))
    assert dump.importers == [{"file": "q.txt", "importer": "nvidia-smi-q", "rows": 1}]
    gpu = dump.tables["gpu"].iloc[0]
    assert gpu["gpu"] == 0 and gpu["throttle_reasons"] == reasons
    if clock is not None:
        assert gpu["sm_clock_mhz"] == clock
    assert any("without its GPU line" in w for w in dump.warnings)


def test_prose_that_names_a_section_is_not_a_report(tmp_path):
    (tmp_path / "notes.txt").write_text(
        "We looked at the Clocks section:\nClocks\nit said the GPU was slow.\n"
    )
    assert not any(i["importer"] == "nvidia-smi-q" for i in load_dump_or_none(tmp_path))


def load_dump_or_none(folder):
    from diagnose.errors import DumpError

    try:
        return load_dump(str(folder)).importers
    except DumpError:
        return []


@pytest.mark.parametrize("prompt", ["$ ", "\u276f ", "root@gpu-3:~# "])
def test_a_headerless_query_loop_takes_its_columns_from_the_command_line(tmp_path, prompt):
    (tmp_path / "loop.txt").write_text(
        f"{prompt}nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv,noheader,nounits -l 1\n"
        "0, 97, 71237\n1, 12, 1024\n0, 95, 71240\n1, 10, 1024\n"
    )
    dump = load_dump(str(tmp_path))
    assert dump.importers == [{"file": "loop.txt", "importer": "nvidia-smi-csv", "rows": 4}]
    # No timestamp field: every row is at the file's time, so each GPU keeps its last (as without -l)
    gpu = dump.tables["gpu"].set_index("gpu")
    assert (gpu.loc[0, "util_pct"], gpu.loc[0, "mem_used_bytes"]) == (95, 71240 * 2**20)
    assert (gpu.loc[1, "util_pct"], gpu.loc[1, "mem_used_bytes"]) == (10, 1024 * 2**20)


def test_rows_with_no_header_and_no_command_line_are_not_guessed(tmp_path):
    (tmp_path / "numbers.txt").write_text("0, 97, 71237\n1, 12, 1024\n")
    assert load_dump_or_none(tmp_path) == []
