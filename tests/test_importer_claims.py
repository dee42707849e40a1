"""Which importer reads a file is decided by the claims the importers make on it, never by their order.

Every importer keeps an example of its format (diagnose/importers/examples/), and each example is
offered to every importer: its own must make the strongest claim, alone, and read rows from it.
"""

from __future__ import annotations

import pytest

import diagnose.importers as importers
from diagnose.dump import load_dump
from diagnose.importers import IMPORTERS, Claim, Importer, Source, Strength, mend, recognise
from diagnose.importers.base import EXAMPLES, FileImporter

TEXT = [importer for importer in IMPORTERS if not (isinstance(importer, FileImporter) and importer.binary)]
BINARY = [importer for importer in IMPORTERS if importer not in TEXT]


def _claims(text: str) -> dict[str, Claim]:
    return {importer.name: found for importer in IMPORTERS if (found := importer.recognise(text))}


def test_every_text_format_keeps_one_example_and_every_example_has_its_importer():
    kept = {path.stem for path in EXAMPLES.glob("*.txt")}
    assert kept == {importer.name for importer in TEXT}, "docs/extending.md#an-importer: add its example"
    assert len({importer.name for importer in IMPORTERS}) == len(IMPORTERS)


@pytest.mark.parametrize("owner", TEXT, ids=lambda importer: importer.name)
def test_an_example_is_claimed_strongest_by_its_own_importer_alone(owner: Importer):
    text = mend(owner.example).text
    claims = _claims(text)
    assert owner.name in claims, f"{owner.name} does not claim its own example"
    rivals = {
        name: found for name, found in claims.items() if name != owner.name and found >= claims[owner.name]
    }
    assert not rivals, f"{owner.name}'s example is claimed as strongly by {sorted(rivals)}"
    assert recognise(text) is owner


@pytest.mark.parametrize("owner", TEXT, ids=lambda importer: importer.name)
def test_a_folder_holding_an_example_is_read_by_its_importer_into_rows(tmp_path, owner: Importer):
    (tmp_path / "pasted.txt").write_text(owner.example, encoding="utf-8")
    used = load_dump(str(tmp_path)).importers
    readers = {row["importer"]: row["rows"] for row in used}
    assert readers.get(owner.name, 0) > 0, used


def test_a_binary_formats_example_is_no_text_format():
    for importer in BINARY:
        assert importer.example and not _claims(mend(importer.example).text), importer.name


def test_the_order_the_importers_are_listed_in_decides_nothing(monkeypatch):
    texts = [importer.example for importer in TEXT]
    # two formats in one paste with no command line between them: the claims still decide
    texts.append(importers.VllmLogImporter().example + importers.OomLogImporter().example)
    texts.append(importers.OomLogImporter().example + importers.TgiLogImporter().example)
    listed = [recognise(mend(text).text) for text in texts]
    monkeypatch.setattr(importers, "IMPORTERS", tuple(reversed(IMPORTERS)))
    assert [recognise(mend(text).text) for text in texts] == listed
    assert [importer.name for importer in listed[-2:]] == ["vllm-log", "tgi-log"]


def test_a_claim_is_its_strength_first_then_the_lines_it_accounts_for():
    assert Claim(Strength.DOCUMENT, 1) > Claim(Strength.STATEMENT, 500) > Claim(Strength.SHAPE, 900)
    assert Claim(Strength.STATEMENT, 12) > Claim(Strength.STATEMENT, 2)


def test_an_engine_log_with_one_oom_is_the_engines_and_an_oom_traceback_is_the_ooms():
    vllm = importers.VllmLogImporter().example
    oom = importers.OomLogImporter().example
    assert recognise(mend(oom).text).name == "pytorch-oom"
    log = vllm * 3 + oom  # six of vLLM's lines, one OOM message
    assert recognise(mend(log).text).name == "vllm-log"
    read = recognise(mend(log).text).read(Source("vllm.log", mend(log).text, 0.0))
    assert "oom" in set(read.tables["events"]["kind"])  # the engine's reader reads the OOM in its log too


def test_an_importer_that_claims_nothing_cannot_be_made():
    class Silent(Importer):
        name = "silent"

    with pytest.raises(TypeError):
        Silent()  # type: ignore[abstract]


def test_formats_shows_an_example_whole_and_names_the_formats_for_a_wrong_name(run_cli):
    code, out, _ = run_cli("formats", "vmstat")
    assert code == 0 and out == importers.VmstatImporter().example
    code, _, err = run_cli("formats", "vmstats")
    assert code == 2 and "no format named 'vmstats'" in err and "vmstat" in err
