"""A terminal capture of several commands is read section by section, each with its own importer.

The outputs here are in each tool's documented layout: ``nvidia-smi --query-gpu`` CSV, ``nvidia-smi
pmon`` and a kernel log's Xid line, one after the other with their prompts, as people paste them.
"""

from __future__ import annotations

from diagnose.dump import load_dump
from diagnose.importers.sections import sections

QUERY = """$ nvidia-smi --query-gpu=timestamp,index,utilization.gpu,memory.used,memory.total --format=csv
timestamp, index, utilization.gpu [%], memory.used [MiB], memory.total [MiB]
2026/06/07 10:59:31.000, 0, 97 %, 71237 MiB, 81559 MiB
2026/06/07 10:59:32.000, 0, 96 %, 71240 MiB, 81559 MiB
"""
PMON = """$ nvidia-smi pmon -c 2
# gpu         pid   type     sm    mem    enc    dec    command
# Idx           #    C/G      %      %      %      %    name
    0       4242     C     93     61      -      -    python3
    0       7099     C      4      2      -      -    python
"""
XID = """$ dmesg -T | grep NVRM
[Sun Jun  7 10:59:40 2026] NVRM: Xid (PCI:0000:07:00): 79, pid=4242, name=python3, GPU has fallen off the bus.
"""


def test_a_capture_of_three_commands_is_cut_before_each_command():
    assert [piece.splitlines()[0] for piece in sections(QUERY + PMON + XID)] == [
        QUERY.splitlines()[0],
        PMON.splitlines()[0],
        XID.splitlines()[0],
    ]


def test_each_section_is_read_by_its_importer_and_nothing_is_dropped(tmp_path):
    (tmp_path / "terminal.txt").write_text(QUERY + "\n" + PMON + "\n" + XID)
    dump = load_dump(str(tmp_path))
    readers = [i["importer"] for i in dump.importers if i["file"] == "terminal.txt"]
    assert readers[:3] == ["nvidia-smi-csv", "nvidia-smi-pmon", "kernel-xid"]
    assert len(dump.tables["gpu"]) == 2 and set(dump.tables["gpu_processes"]["pid"]) == {4242, 7099}
    assert dump.tables["events"]["kind"].tolist().count("xid") == 1


def test_a_file_of_one_format_with_prompts_between_its_snapshots_is_read_whole(tmp_path):
    second = QUERY.replace("10:59:3", "11:00:3")
    (tmp_path / "loops.txt").write_text(QUERY + second)
    dump = load_dump(str(tmp_path))
    assert dump.importers == [{"file": "loops.txt", "importer": "nvidia-smi-csv", "rows": 4}]
