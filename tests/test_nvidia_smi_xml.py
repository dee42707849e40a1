"""`nvidia-smi -q -x`: the XML form of -q, read as -q's sections and keys, a document at a time.

The documents here are built from the format as nvidia-smi writes it (nvsmi_device_v12.dtd's element
names: product_name, fb_memory_usage, clocks_event_reasons, gpu_power_readings, processes, ...).
"""

from __future__ import annotations

import pytest

from diagnose.importers import mend, recognise
from diagnose.importers.base import Source
from tests.conftest import SHARED_DATA

MTIME = 1_765_000_000.0
FIELD_B = SHARED_DATA / "real-samples" / "field-2026-12-b" / "smi"


def _document(stamp: str, used_mib: int, reason: str = "Not Active", tag: str = "clocks_event_reason") -> str:
    group = "clocks_event_reasons" if tag == "clocks_event_reason" else "clocks_throttle_reasons"
    return f"""<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log>
	<timestamp>{stamp}</timestamp>
	<driver_version>535.104.05</driver_version>
	<cuda_version>12.2</cuda_version>
	<gpu id="00000000:07:00.0">
		<product_name>NVIDIA A100-SXM4-80GB</product_name>
		<fb_memory_usage><total>81920 MiB</total><used>{used_mib} MiB</used></fb_memory_usage>
		<utilization><gpu_util>97 %</gpu_util><memory_util>60 %</memory_util></utilization>
		<{group}>
			<{tag}_gpu_idle>Not Active</{tag}_gpu_idle>
			<{tag}_sw_power_cap>{reason}</{tag}_sw_power_cap>
		</{group}>
		<temperature><gpu_temp>63 C</gpu_temp></temperature>
		<gpu_power_readings><power_draw>398.20 W</power_draw><current_power_limit>400.00 W</current_power_limit>
		</gpu_power_readings>
		<clocks><sm_clock>1275 MHz</sm_clock></clocks>
		<max_clocks><sm_clock>1410 MHz</sm_clock></max_clocks>
		<processes>
			<process_info>
				<pid>4242</pid><type>C</type>
				<process_name>python3 -m vllm.entrypoints.openai.api_server</process_name>
				<used_memory>71000 MiB</used_memory>
			</process_info>
		</processes>
	</gpu>
</nvidia_smi_log>
"""


def _read(text: str):
    importer = recognise(mend(text).text)
    assert importer is not None and importer.name == "nvidia-smi-xml"
    return importer.read(Source("smi.xml", mend(text).text, MTIME))


def test_one_document_gives_the_gpu_its_clock_reasons_and_its_processes():
    result = _read(_document("Tue Dec  5 10:00:00 2023", 71237, reason="Active"))
    gpu = result.tables["gpu"].iloc[0]
    assert gpu["gpu_name"] == "NVIDIA A100-SXM4-80GB" and gpu["util_pct"] == 97.0
    assert gpu["mem_used_bytes"] == 71237 * 2**20 and gpu["mem_total_bytes"] == 81920 * 2**20
    assert (gpu["sm_clock_mhz"], gpu["max_sm_clock_mhz"]) == (1275.0, 1410.0)
    assert (gpu["power_w"], gpu["power_limit_w"], gpu["temp_c"]) == (398.2, 400.0, 63.0)
    assert gpu["throttle_reasons"] == "sw_power_cap"
    assert gpu["ts"] == 1_701_770_400.0  # Tue Dec 5 10:00:00 2023, read as UTC without --tz
    process = result.tables["gpu_processes"].iloc[0]
    assert (process["pid"], process["mem_used_bytes"]) == (4242, 71000 * 2**20)
    assert result.environment == {"driver_version": "535.104.05", "cuda_version": "12.2"}


def test_a_document_a_second_is_a_snapshot_each_and_older_drivers_throttle_names_are_read():
    text = _document("Tue Dec  5 10:00:00 2023", 100) + _document(
        "Tue Dec  5 10:00:01 2023", 200, reason="Active", tag="clocks_throttle_reason"
    )
    gpu = _read(text).tables["gpu"]
    assert gpu["mem_used_bytes"].tolist() == [100 * 2**20, 200 * 2**20]
    assert gpu["throttle_reasons"].tolist() == ["none", "sw_power_cap"]


def test_a_document_cut_short_is_read_up_to_the_cut():
    whole = _document("Tue Dec  5 10:00:00 2023", 100)
    cut = _document("Tue Dec  5 10:00:01 2023", 200)
    result = _read(whole + cut[: cut.index("<processes>")] + "</nvidia_smi_log>\n")
    assert list(result.tables["gpu"]["mem_used_bytes"]) == [100 * 2**20, 200 * 2**20]
    assert any("cut short up to the cut" in w for w in result.warnings)
    value_cut = _read(whole + cut[: cut.index("MiB</used>")])  # cut inside a value, no end at all
    assert list(value_cut.tables["gpu"]["mem_total_bytes"]) == [81920 * 2**20] * 2


def test_a_gpu_element_pasted_without_its_document_is_read():
    document = _document("Tue Dec  5 10:00:00 2023", 300)
    fragment = document[document.index('<gpu id="') : document.index("</gpu>") + len("</gpu>")]
    result = _read("the GPU's part of nvidia-smi -q -x:\n" + fragment + "\n")
    gpu = result.tables["gpu"].iloc[0]
    assert gpu["mem_used_bytes"] == 300 * 2**20 and gpu["gpu_name"] == "NVIDIA A100-SXM4-80GB"


def test_entities_declared_in_a_document_are_never_expanded():
    """A billion-laughs document: refused whole, not parsed."""
    bomb = (
        '<nvidia_smi_log><!DOCTYPE x [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>'
        "<timestamp>&b;</timestamp><gpu id='0'><product_name>&b;</product_name></gpu></nvidia_smi_log>\n"
    )
    result = _read(bomb + _document("Tue Dec  5 10:00:00 2023", 100))
    assert len(result.tables["gpu"]) == 1 and result.tables["gpu"]["gpu_name"].iloc[0] != "a" * 100


def _rendered(text: str, escape_open: bool) -> str:
    """The XML as a web page shows it when its source is copied: every '>' as &gt; (and '<' as &lt;,
    or left literal, as some pages do), indentation as '&nbsp; ' runs."""
    lines = []
    for line in text.splitlines():
        body = line.lstrip("\t")
        body = body.replace(">", "&gt;")
        body = body.replace("<", "&lt;") if escape_open else body
        lines.append("&nbsp; " * 4 * (len(line) - len(body)) + body)
    return "\n".join(lines)


def _gpu_children(used_mib: int, reason: str) -> str:
    """A GPU element's middle, from the end of its <pci> element (its start not copied) to its clocks."""
    document = _document("Tue Dec  5 10:00:00 2023", used_mib, reason=reason)
    middle = document[document.index("\t\t<fb_memory_usage>") : document.index("\t\t<processes>")]
    return (
        "\t\t</pci>\n\t\t<fan_speed>30 %</fan_speed>\n\t\t<performance_state>P0</performance_state>\n"
        + middle
    )


@pytest.mark.parametrize("escape_open", [False, True], ids=["gt-only", "lt-and-gt"])
def test_a_gpus_elements_copied_from_a_rendered_page_are_read_as_gpu_0(escape_open):
    text = _rendered(_gpu_children(61234, "Active"), escape_open) + "\n&nbsp; &nbsp; &nb"  # cut mid-entity
    result = _read(text)
    gpu = result.tables["gpu"].iloc[0]
    assert gpu["gpu"] == 0 and gpu["mem_used_bytes"] == 61234 * 2**20 and gpu["util_pct"] == 97.0
    assert gpu["throttle_reasons"] == "sw_power_cap" and gpu["sm_clock_mhz"] == 1275.0
    assert any("without its start (<gpu id=…>): read as GPU 0" in w for w in result.warnings)


def test_another_tools_xml_with_a_section_of_the_same_name_is_not_a_gpus():
    sensors = (
        "<sensors>\n<temperature>\n<value>41</value>\n<unit>C</unit>\n<sensor>cpu0</sensor>\n"
        "</temperature>\n<utilization><value>12</value></utilization>\n</sensors>\n"
    )
    importer = recognise(mend(sensors).text)
    assert importer is None or importer.name != "nvidia-smi-xml"


def test_a_fragment_declaring_entities_is_refused_unexpanded():
    bomb = '<!DOCTYPE x [<!ENTITY a "aaaaaaaaaa">]>\n' + _gpu_children(100, "Not Active").replace(
        "<total>81920 MiB</total>", "<total>&a;</total>"
    )
    result = _read(bomb)
    assert "gpu" not in result.tables
    assert any("not nvidia-smi's or unreadable" in w for w in result.warnings)


@pytest.mark.skipif(not FIELD_B.is_dir(), reason="../shared/data/real-samples is not here")
def test_the_field_paste_of_a_rendered_fragment_is_read():
    result = _read((FIELD_B / "20_q_x_xml_html_entities_mangled.txt").read_text())
    gpu = result.tables["gpu"].iloc[0]
    assert gpu["gpu"] == 0 and gpu["throttle_reasons"] == "gpu_idle"


def test_a_fragment_that_begins_inside_an_element_keeps_the_figures_after_its_end_tag():
    """Copied from inside <pci>: its children first, then the end tags of <pci_bridge_chip> and <pci>,
    whose starts were not copied; the figures after them are still the GPU's."""
    inside_pci = (
        "\t\t\t\t<bridge_chip_type>N/A</bridge_chip_type>\n\t\t\t\t<bridge_chip_fw>N/A</bridge_chip_fw>\n"
        "\t\t\t</pci_bridge_chip>\n\t\t\t<replay_counter>0</replay_counter>\n"
    )
    result = _read(inside_pci + _gpu_children(40000, "Active"))
    gpu = result.tables["gpu"].iloc[0]
    assert gpu["mem_used_bytes"] == 40000 * 2**20 and gpu["throttle_reasons"] == "sw_power_cap"
