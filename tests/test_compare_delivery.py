"""What a fix delivered against the gain the diagnosis expected of it (compare --expects, archive add
--expects): the same simulated service cold and warmed up, and one whose "fix" changed nothing."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from diagnose.archive import Archive
from diagnose.archive.store import _MIGRATIONS, APPLICATION_ID
from diagnose.compare import compare_evidence, measure_both
from diagnose.compare.model import AS_EXPECTED, DELIVERED, DELIVERED_NOTHING, MORE, NOTHING
from diagnose.errors import InputError
from fixtures.simulate import T0, Service, simulate

COLD = Service(starts=(0.0, 300.0), cold_factor=12.0, cold_tau_s=15.0)
CAUSE = "cold-start-contamination"


def _dump(service: Service, seed: int, folder: Path) -> str:
    """The service's requests, and its starts as the manifest states them."""
    folder.mkdir(parents=True, exist_ok=True)
    simulate(service, seed).frames["requests"].to_csv(folder / "requests.csv", index=False)
    stated = ", ".join(f"{T0 + start}" for start in service.starts)
    (folder / "manifest.yaml").write_text(f"format: diagnose-dump/1\nprocess_start: [{stated}]\n")
    return str(folder)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """Before: the service cold after each start. Warmed: the same service and load warmed up before
    traffic (other draws). Unchanged: still cold (other draws again): a fix that did nothing."""
    root = tmp_path_factory.mktemp("delivery")
    return {
        "before": _dump(COLD, 3, root / "before"),
        "warmed": _dump(replace(COLD, cold_factor=1.0), 5, root / "warmed"),
        "unchanged": _dump(COLD, 7, root / "unchanged"),
    }


def test_a_warm_up_delivers_about_the_gain_the_diagnosis_expected(pair):
    before, after, requests = measure_both(pair["before"], pair["warmed"], second=False)
    comparison = compare_evidence(before, after, requests, "warm-up before traffic", CAUSE)
    delivered = comparison.delivery
    assert delivered is not None and delivered.verdict == DELIVERED
    p99 = next(f for f in delivered.figures if f.name == "p99")
    assert p99.expected < -0.3 and p99.measured is not None and p99.measured < -0.3
    assert p99.verdict in (AS_EXPECTED, MORE) and 0.7 <= p99.share <= 1.4, p99
    assert f"the fix for {CAUSE} delivered: P99 " in comparison.headline
    assert "of the expected gain" in comparison.headline
    assert comparison.pseudo_optimisation is None


def test_the_warm_figures_alone_would_have_shown_no_gain(pair):
    """Why the delivery reads every request: compare's own figures leave the cold ones out on both
    sides, so there a warm-up fix moves nothing."""
    before, after, requests = measure_both(pair["before"], pair["warmed"], second=False)
    assert before.cold_excluded > 0 and "every_p99" in before.measures
    p99 = next(f for f in compare_evidence(before, after, requests).figures if f.name == "p99")
    assert abs(p99.change) < 0.1


def test_a_fix_that_delivered_nothing_is_a_pseudo_optimisation(pair):
    before, after, requests = measure_both(pair["before"], pair["unchanged"], second=False)
    comparison = compare_evidence(before, after, requests, "warm-up before traffic", CAUSE)
    assert comparison.delivery is not None and comparison.delivery.verdict == DELIVERED_NOTHING
    p99 = next(f for f in comparison.delivery.figures if f.name == "p99")
    assert p99.verdict == NOTHING and p99.measured_high >= 0 and p99.share < 0.5, p99
    pseudo = comparison.pseudo_optimisation
    assert pseudo is not None and pseudo.expected_of == CAUSE and pseudo.change == "warm-up before traffic"
    assert comparison.headline.startswith("pseudo-optimisation ('warm-up before traffic'): the fix for")
    assert "none of the expected gain" in comparison.headline


def test_expecting_a_gain_the_diagnosis_did_not_compute_says_which_it_did(pair):
    before, after, requests = measure_both(pair["before"], pair["warmed"], second=False)
    with pytest.raises(InputError, match=r"--expects gpu-throttling: .*no such hypothesis.*"
                       r"with an expected gain: cold-start-contamination"):  # fmt: skip
        compare_evidence(before, after, requests, None, "gpu-throttling")


def test_the_cli_reports_the_delivery_and_refuses_an_unknown_cause(run_cli, pair, capsys):
    code, out, err = run_cli(
        "compare", pair["before"], pair["warmed"], "--expects", CAUSE, "--format", "json"
    )
    assert code == 0, err
    delivery = json.loads(out)["delivery"]
    assert delivery["cause"] == CAUSE and delivery["verdict"] == DELIVERED
    assert {f["name"] for f in delivery["figures"]} == {"p50", "p99"}
    code, out, _ = run_cli("compare", pair["before"], pair["warmed"], "--expects", CAUSE)
    assert "expected against delivered: the fix for cold-start-contamination: delivered" in out
    with pytest.raises(SystemExit) as stopped:
        run_cli("compare", pair["before"], pair["warmed"], "--expects", "cold-start")
    assert stopped.value.code == 2 and "unknown root cause 'cold-start'" in capsys.readouterr().err


def test_the_archive_keeps_the_expected_gain_and_what_the_fix_delivered(run_cli, pair, tmp_path):
    path = tmp_path / "perf.sqlite"
    run_cli("archive", "add", pair["before"], "--archive", path, "--label", "cold")
    code, _, err = run_cli(
        "archive", "add", pair["unchanged"], "--archive", path, "--baseline", "1",
        "--change", "warm-up before traffic", "--expects", CAUSE,
    )  # fmt: skip
    assert code == 0, err
    assert "against #1: pseudo-optimisation ('warm-up before traffic')" in err
    with Archive(path, create=False) as archive:
        assert CAUSE in archive.evidence(1).gains
        (row,) = archive.comparisons(2)
    assert row.delivery is not None and row.delivery.verdict == DELIVERED_NOTHING
    code, out, _ = run_cli("archive", "show", "2", "--archive", path)
    assert "none of the expected gain" in out
    code, _, err = run_cli("archive", "add", pair["warmed"], "--archive", path, "--expects", CAUSE)
    assert code == 2 and "needs --baseline" in err


def test_a_recording_archived_before_gains_were_kept_says_so(run_cli, pair, tmp_path):
    """A schema-1 archive is migrated; its recordings have no expected gain to check a fix against."""
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    for statement in _MIGRATIONS[1]:
        db.execute(statement)
    db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    db.execute("PRAGMA user_version = 1")
    db.execute(
        "INSERT INTO entries (added_at, dump, requests, cold_excluded, environment, background, "
        "hypotheses, warnings) VALUES ('2026-01-01T00:00:00Z', 'old/', 0, 0, '{}', '{}', "
        "'[[\"cold-start-contamination\", 0.9]]', '[]')"
    )
    db.commit()
    db.close()
    code, _, err = run_cli(
        "compare", "--baseline", "1", "--archive", path, pair["warmed"], "--expects", CAUSE
    )
    assert code == 2
    assert "no counterfactual the evidence allows for it" in err and "expected gain: none" in err
