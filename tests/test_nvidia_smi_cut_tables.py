"""The default table cut mid-row, its "MIG devices:" section alone, and --query-compute-apps with any of
its fields: read from nvidia-smi's own layouts, not from one paste.

The tables are built in the layouts nvidia-smi writes: the default table of the 525+ drivers (91
columns) and of the 470 ones (79), the MIG devices section of 470+ (memory row, then BAR1 row) and of
550+ ("Shared Memory-Usage"), and CSV headers as ``--help-query-compute-apps`` names the fields.
"""

from __future__ import annotations

import pytest

from diagnose.dump import load_dump
from diagnose.errors import DumpError
from tests.conftest import SHARED_DATA

MIB = 2**20
FIELD_B = SHARED_DATA / "real-samples" / "field-2026-12-b" / "smi"

HEAD_535 = """\
+---------------------------------------------------------------------------------------+
| NVIDIA-SMI 535.54.03              Driver Version: 535.54.03    CUDA Version: 12.2     |
|-----------------------------------------+----------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |         Memory-Usage | GPU-Util  Compute M. |
|                                         |                      |               MIG M. |
|=========================================+======================+======================|
|   0  NVIDIA A100-SXM4-80GB          On  | 00000000:07:00.0 Off |                    0 |
| N/A   61C    P0             312W / 400W |  70001MiB / 81920MiB |     97%      Default |
|                                         |                      |             Disabled |
+-----------------------------------------+----------------------+----------------------+
|   1  NVIDIA A100-SXM4-80GB          On  | 00000000:0F:00.0 Off |                    0 |
"""
HEAD_470 = """\
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 470.82.01    Driver Version: 470.82.01    CUDA Version: 11.4     |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  Tesla V100-SXM2...  On   | 00000000:00:1E.0 Off |                    0 |
"""


def _read(tmp_path, text: str, name: str = "smi.txt"):
    (tmp_path / name).write_text(text)
    return load_dump(str(tmp_path))


@pytest.mark.parametrize(
    ("cut", "figures"),
    [
        ("| N/A   44C    P0             288W / 40", {"temp_c": 44, "power_w": 288}),
        ("| N/A   44C    P0             288W / 400W |  61234MiB / 819", {"power_limit_w": 400}),
        (
            "| N/A   44C    P0             288W / 400W |  61234MiB / 81920MiB |     9",
            {"mem_used_bytes": 61234 * MIB},
        ),
        ("| N/A   4", {}),
    ],
    ids=["in-the-cap", "in-the-memory", "in-the-utilisation", "in-the-temperature"],
)
def test_a_figures_line_cut_short_keeps_the_cells_before_the_cut(tmp_path, cut, figures):
    dump = _read(tmp_path, HEAD_535 + cut + "\n")
    gpu = dump.tables["gpu"]
    first = gpu.iloc[0]
    assert (first["gpu"], first["mem_used_bytes"], first["util_pct"]) == (0, 70001 * MIB, 97)
    if not figures:  # nothing whole on the cut line: GPU 1 has no row
        assert list(gpu["gpu"]) == [0]
        return
    cut_row = gpu.iloc[1]
    assert cut_row["gpu"] == 1 and cut_row["gpu_name"] == "NVIDIA A100-SXM4-80GB"
    for column, value in figures.items():
        assert cut_row[column] == value
    assert cut_row.isna()["util_pct"]  # "9" of "97%" is no figure
    assert any("GPU 1's figures line is cut short" in w and "read the cells" in w for w in dump.warnings)


def test_a_470_table_cut_in_its_memory_cell_keeps_temperature_and_power(tmp_path):
    gpu = (
        _read(tmp_path, HEAD_470 + "| N/A   38C    P0    54W / 300W |   1024MiB / 1\n").tables["gpu"].iloc[0]
    )
    assert (gpu["temp_c"], gpu["power_w"], gpu["power_limit_w"]) == (38, 54, 300)
    assert "mem_used_bytes" not in gpu  # "1024MiB / 1": the memory cell is cut


def test_a_whole_figures_line_after_a_cut_looking_one_wins(tmp_path):
    """Only a GPU with no whole figures line keeps the cut one's cells."""
    whole = "| N/A   45C    P0             290W / 400W |  61234MiB / 81920MiB |     88%      Default |\n"
    gpu = _read(tmp_path, HEAD_535 + "| N/A   45C    P0\n" + whole).tables["gpu"]
    assert list(gpu["util_pct"]) == [97, 88] and gpu["power_limit_w"].iloc[1] == 400


MIG_470 = """\
+-----------------------------------------------------------------------------+
| MIG devices:                                                                |
+------------------+----------------------+-----------+-----------------------+
| GPU  GI  CI  MIG |         Memory-Usage |        Vol|         Shared        |
|      ID  ID  Dev |           BAR1-Usage | SM     Unc| CE  ENC  DEC  OFA  JPG|
|                  |                      |        ECC|                       |
|==================+======================+===========+=======================|
|  0    1   0   0  |  30210MiB / 40192MiB | 42      0 |  3   0    2    0    0 |
|                  |      5MiB / 65535MiB |           |                       |
+------------------+----------------------+-----------+-----------------------+
|  0    2   0   1  |     12MiB / 19968MiB | 28      0 |  2   0    1    0    0 |
|                  |      0MiB / 32767MiB |           |                       |
+------------------+----------------------+-----------+-----------------------+
|  0    2   1   2  |     12MiB / 19968MiB | 14      0 |  2   0    1    0    0 |
|                  |      0MiB / 32767MiB |           |                       |
+------------------+----------------------+-----------+-----------------------+
|  1    7   0   0  |   4850MiB /  9856MiB | 14      0 |  1   0    0    0    0 |
"""


def test_the_mig_devices_section_alone_gives_each_gpu_instance_its_memory(tmp_path):
    dump = _read(tmp_path, MIG_470 + "|  1    8   0   1  |   48\n")  # the last row cut inside its memory
    gpu = dump.tables["gpu"]
    assert dump.importers[0]["importer"] == "nvidia-smi-table"
    # GI 2's two compute instances share its memory: one row
    assert list(zip(gpu["gpu"], gpu["mig_instance"], strict=True)) == [(0, "1"), (0, "2"), (1, "7")]
    assert list(gpu["mem_used_bytes"]) == [30210 * MIB, 12 * MIB, 4850 * MIB]
    assert list(gpu["mem_total_bytes"]) == [40192 * MIB, 19968 * MIB, 9856 * MIB]
    assert any("MIG device's line whose memory is not whole" in w and "|  1    8" in w for w in dump.warnings)


def test_a_whole_table_keeps_its_gpus_row_and_adds_its_instances(tmp_path):
    mig_550 = (
        "| GPU  GI  CI  MIG |              Shared Memory-Usage |        Vol|        Shared         |\n"
        "|==================+==================================+===========+=======================|\n"
        "|  0    2   0   0  |           11091MiB / 40448MiB    | 60      0 |  3   0    3    0    3 |\n"
        "|                  |               0MiB / 24739MiB    |           |                       |\n"
    )
    processes = (
        "| Processes:                                                                              |\n"
        "|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |\n"
        "|    0    2    0            21180      C   /usr/bin/python3                       2296MiB |\n"
    )
    dump = _read(tmp_path, HEAD_535.rsplit("|   1 ", 1)[0] + mig_550 + processes)
    gpu = dump.tables["gpu"]
    assert gpu["mig_instance"].isna().tolist() == [True, False]
    assert gpu["mem_used_bytes"].tolist() == [70001 * MIB, 11091 * MIB]
    # a MIG-mode process line (GPU, GI, CI, PID) is a process, not a MIG device
    assert dump.tables["gpu_processes"]["pid"].tolist() == [21180]


def test_compute_apps_with_names_but_no_pid_give_each_gpu_its_processes_names(tmp_path):
    text = (
        "# nvidia-smi --query-compute-apps=gpu_uuid,name --format=csv\n"
        "gpu_uuid, process_name\n"
        "GPU-1b2c3d4e-0000-1111-2222-333344445555, python3\n"
        "GPU-9f8e7d6c-0000-1111-2222-333344445555, python3\n"
        "GPU-9f8e7d6c-0000-1111-2222-333344445555, python3\n"
        "GPU-9f8e7d6c-0000-1111-2222-333344445555, tritonserver\n"
    )
    dump = _read(tmp_path, text)
    apps = dump.tables["gpu_processes"]
    assert dump.importers[0]["importer"] == "nvidia-smi-compute-apps"
    # the dump tells a GPU's processes apart by pid: without one, a GPU's processes are one row
    assert list(zip(apps["gpu"], apps["name"], strict=True)) == [(0, "python3"), (1, "python3; tritonserver")]
    assert apps["pid"].isna().all()
    assert any("no pid field" in w and "4 processes as 2 rows" in w for w in dump.warnings)


def test_compute_apps_with_pid_and_name_only_keep_their_pids(tmp_path):
    apps = _read(tmp_path, "process_name, pid\n/usr/bin/python3, 4242\n").tables["gpu_processes"]
    assert (apps["pid"].iloc[0], apps["name"].iloc[0], apps["gpu"].iloc[0]) == (4242, "/usr/bin/python3", 0)


@pytest.mark.parametrize(
    "header",
    ["name, pid", "pid, process_name, cpu_percent", "gpu_uuid, gpu_name"],
    ids=["not-nvidia-smis-header-name", "another-tools-field", "no-process-field"],
)
def test_a_csv_of_processes_that_is_not_compute_apps_is_not_read_as_one(tmp_path, header):
    (tmp_path / "ps.csv").write_text(f"{header}\npython3, 4242{', 12.5' if 'cpu' in header else ''}\n")
    with pytest.raises(DumpError, match="no tables found"):
        load_dump(str(tmp_path))


@pytest.mark.skipif(not FIELD_B.is_dir(), reason="../shared/data/real-samples is not here")
def test_the_field_pastes_of_these_forms_are_read():
    table = load_dump(str(FIELD_B / "02_default_h100x4_535_161_cut.txt")).tables["gpu"].iloc[0]
    assert (table["gpu"], table["temp_c"], table["power_w"]) == (0, 34, 237)
    assert "power_limit_w" not in table  # "700" without its W: cut inside the figure
    mig = load_dump(str(FIELD_B / "07_mig_devices_table_a100_cut.txt")).tables["gpu"]
    assert list(mig["gpu"]) == [1, 1, 1, 2] and mig["mem_used_bytes"].iloc[0] == 14366 * MIB
    apps = load_dump(str(FIELD_B / "14_compute_apps_uuid_name_vgpu_root_prompt.txt")).tables["gpu_processes"]
    assert list(apps["gpu"]) == [0, 1] and list(apps["name"]) == ["vgpu", "vgpu"]


PROCESSES_ALONE = """\
+---------------------------------------------------------------------------------------+
| Processes:                                                                            |
|  GPU   GI   CI        PID   Type   Process name                            GPU Memory |
|        ID   ID                                                             Usage      |
|=======================================================================================|
|    0   N/A  N/A      4100      C   python3 -m vllm.entrypoints.openai       70120MiB |
|    1   N/A  N/A      4211      C   ...ocal/bin/train_other_job              20480MiB |
|    1   N/A  N/
"""


def test_the_processes_section_pasted_alone_gives_each_process_on_its_gpu(tmp_path):
    processes = _read(tmp_path, PROCESSES_ALONE).tables["gpu_processes"]
    assert list(processes["pid"]) == [4100, 4211] and list(processes["gpu"]) == [0, 1]
    assert processes["mem_used_bytes"].iloc[0] == 70120 * 2**20


def test_a_processes_title_with_no_process_row_is_not_a_table():
    from diagnose.importers.nvidia_smi_report import NvidiaSmiTableImporter

    assert not NvidiaSmiTableImporter().recognise("| Processes:   |\n|  No running processes found |\n")


def test_the_processes_rows_pasted_without_their_title_are_still_that_section(tmp_path):
    """Rows of the Processes section alone, in the table's layout (GI and CI columns of a MIG-capable
    driver): each process on its GPU, as with the title."""
    rows = "".join(
        f"|    3   N/A  N/A     {pid}      C   /opt/conda/bin/python3           {mib:>5}MiB |\n"
        for pid, mib in ((12439, 0), (12442, 9347), (12443, 0))
    )
    processes = _read(tmp_path, rows).tables["gpu_processes"]
    assert list(processes["pid"]) == [12439, 12442, 12443] and set(processes["gpu"]) == {3}
    assert processes["mem_used_bytes"].iloc[1] == 9347 * 2**20


def test_one_row_like_a_process_without_the_title_is_not_a_table():
    from diagnose.importers.nvidia_smi_report import NvidiaSmiTableImporter

    assert not NvidiaSmiTableImporter().recognise("|    0   1234   C   python   100MiB |\n")
