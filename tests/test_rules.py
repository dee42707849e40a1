"""Rule files: the built-in set, validation errors, and the rule engine's verdicts."""

from __future__ import annotations

import textwrap

import pytest

from diagnose.errors import RuleError
from diagnose.facts.model import Facts
from diagnose.judge import Status, default_rules_dir, judge, load_rule_file, load_rules
from diagnose.judge.calibration import UNCONTESTED_FLOOR, calibrated
from tests.conftest import ROOT

RULE = """\
id: cpu-bound-stage
title: test rule
summary: a rule for tests
when: busy and hot
conditions:
  busy:
    if: gpu.util_pct.mean >= 80
    weight: 0.5
    evidence: GPU at {gpu.util_pct.mean}
  hot:
    if: host.cpu_pct.mean >= 50
    weight: 0.4
    strength: ramp(host.cpu_pct.mean, 50, 100)
    evidence: CPU at {host.cpu_pct.mean}
contrary:
  idle_thread:
    if: thread.busiest.cpu_pct < 10
    weight: 0.5
    evidence: busiest thread only {thread.busiest.cpu_pct}
verify: [look]
remedy: [fix]
pitfalls: [do not panic]
"""


def _rule(tmp_path, text=RULE, name="rule.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return load_rule_file(path)


def _facts(**values):
    facts = Facts()
    for name, value in values.items():
        facts.add(name.replace("__", "."), value, "test")
    return facts


def test_builtin_rules_load_and_each_is_a_complete_checklist():
    rules = load_rules(default_rules_dir())
    assert {r.id for r in rules} >= {
        "cpu-bound-stage",
        "memory-fragmentation",
        "cold-start-contamination",
        "compute-bound-forward",
        "input-length-shift",
    }
    contract = (ROOT / "docs" / "dump-format.md").read_text(encoding="utf-8")
    for rule in rules:
        assert f"| `{rule.id}` |" in contract, f"{rule.id}: not in docs/dump-format.md's root-cause ids"
        assert rule.path == f"rules/{rule.id}.yaml"
        assert rule.verify and rule.remedy and rule.pitfalls and rule.contrary


def test_a_folder_of_rules_is_built_once_and_again_when_a_file_changes(tmp_path):
    (tmp_path / "rule.yaml").write_text(RULE, encoding="utf-8")
    (first,) = load_rules(tmp_path)
    (again,) = load_rules(tmp_path)
    assert again is first, "an unchanged folder gives the rules built before"
    (tmp_path / "rule.yaml").write_text(RULE.replace("title: test rule", "title: the edited rule"))
    (edited,) = load_rules(tmp_path)
    assert edited.title == "the edited rule"
    (tmp_path / "rule.yaml").write_text(RULE.replace("weight: 0.5", "weight: 7"))  # a file gone wrong
    with pytest.raises(RuleError, match="weight"):
        load_rules(tmp_path)


def test_a_rule_fires_with_certainty_factor_score(tmp_path):
    rule = _rule(tmp_path)
    (outcome,) = judge([rule], _facts(gpu__util_pct__mean=90.0, host__cpu_pct__mean=75.0))
    assert outcome.status == Status.FIRED
    # the second condition half way up its ramp: strength 0.25 + 0.75 * 0.5; belief 0.5 + 0.4 * 0.625 * 0.5
    assert outcome.belief == pytest.approx(0.625)
    assert outcome.score == pytest.approx(calibrated(0.625), abs=1e-3)
    assert [e.text for e in outcome.evidence] == ["GPU at 90%", "CPU at 75%"]


def test_a_condition_that_barely_holds_counts_a_quarter_of_its_weight(tmp_path):
    (outcome,) = judge([_rule(tmp_path)], _facts(gpu__util_pct__mean=90.0, host__cpu_pct__mean=50.0))
    assert outcome.belief == pytest.approx(0.5 + 0.4 * 0.25 * 0.5)


def test_a_ramp_that_does_not_start_at_its_conditions_threshold_is_refused(tmp_path):
    """One threshold per condition: the if's, where the ramp starts; not a second one below it."""
    text = RULE.replace("ramp(host.cpu_pct.mean, 50, 100)", "ramp(host.cpu_pct.mean, 40, 100)")
    with pytest.raises(RuleError) as error:
        _rule(tmp_path, text)
    assert error.value.field == "conditions.hot.strength"
    assert (
        "one threshold per condition" in error.value.problem
        and "host.cpu_pct.mean with 50" in error.value.problem
    )


def test_contrary_evidence_lowers_the_score(tmp_path):
    rule = _rule(tmp_path)
    facts = _facts(gpu__util_pct__mean=90.0, host__cpu_pct__mean=100.0, thread__busiest__cpu_pct=5.0)
    (outcome,) = judge([rule], facts)
    belief, disbelief = 0.5 + 0.4 * 0.5, 0.5
    assert outcome.belief == pytest.approx((belief - disbelief) / (1 - disbelief))
    assert [e.text for e in outcome.contrary] == ["busiest thread only 5%"]


WEAK = RULE.replace("when: busy and hot", "when: busy or hot").replace(
    "    evidence: GPU at {gpu.util_pct.mean}\n",
    "    evidence: GPU at {gpu.util_pct.mean}\n    unmet: the GPU only {gpu.util_pct.mean} busy\n",
)


def test_weak_evidence_with_none_against_is_unlikely_never_zero_and_says_what_would_raise_it(tmp_path):
    """The CPU barely hot (belief 0.1) maps to 0.0000 by the calibration; shown, it would read as ruled out."""
    facts = _facts(gpu__util_pct__mean=20.0, host__cpu_pct__mean=50.0, thread__busiest__cpu_pct=40.0)
    (outcome,) = judge([_rule(tmp_path, WEAK)], facts)
    assert outcome.status == Status.FIRED and outcome.belief == pytest.approx(0.1)
    assert calibrated(0.1) < 0.001 and outcome.score == UNCONTESTED_FLOOR
    assert outcome.unseen == ["the GPU only 20% busy"]


def test_the_floor_is_for_uncontested_evidence_only():
    assert calibrated(0.1, contested=False) == UNCONTESTED_FLOOR
    assert calibrated(0.1, contested=True) < 0.001
    assert calibrated(0.0, contested=False) == 0.0  # no evidence, no floor
    assert calibrated(0.7, contested=False) == calibrated(0.7)  # above it, the map alone


def test_false_when_rules_out_and_says_why(tmp_path):
    (outcome,) = judge([_rule(tmp_path)], _facts(gpu__util_pct__mean=20.0))
    assert outcome.status == Status.RULED_OUT
    assert outcome.reason == "gpu.util_pct.mean >= 80 is false (gpu.util_pct.mean = 20%)"


UNMET = (
    RULE.replace("when: busy and hot", "when: (busy and hot) or calm")
    .replace(
        "    evidence: GPU at {gpu.util_pct.mean}\n",
        "    evidence: GPU at {gpu.util_pct.mean}\n    unmet: the GPU only {gpu.util_pct.mean} busy\n",
    )
    .replace(
        "contrary:",
        """  calm:
    if: host.cpu_pct.mean < 5 and thread.busiest.cpu_pct < 5
    weight: 0.3
    evidence: calm
    unmet: the busiest thread at {thread.busiest.cpu_pct}
contrary:""",
    )
)


def test_a_ruled_out_rule_says_why_in_its_conditions_own_words(tmp_path):
    """For ``a and b`` the first condition that failed is enough; for ``a or b`` both are said."""
    rule = _rule(tmp_path, UNMET)
    facts = _facts(gpu__util_pct__mean=20.0, host__cpu_pct__mean=10.0, thread__busiest__cpu_pct=40.0)
    (outcome,) = judge([rule], facts)
    assert outcome.status == Status.RULED_OUT
    assert outcome.reason == "the GPU only 20% busy; the busiest thread at 40%"


def test_an_unmet_text_whose_fact_is_missing_says_what_would_measure_it(tmp_path):
    (outcome,) = judge([_rule(tmp_path, UNMET)], _facts(gpu__util_pct__mean=20.0, host__cpu_pct__mean=10.0))
    assert outcome.reason == "the GPU only 20% busy; calm: not measured (needs processes: max_thread_cpu_pct)"


def test_a_path_with_no_evidence_at_all_is_left_out_where_a_measured_one_says_why(tmp_path):
    """``calm``, false where its evidence is missing (as a statement no log made is), read nothing the dump
    has: that it was not measured is no reason; the GPU's figure is."""
    guarded = UNMET.replace(
        "if: host.cpu_pct.mean < 5 and thread.busiest.cpu_pct < 5",
        "if: known(thread.busiest.cpu_pct) and thread.busiest.cpu_pct < 5",
    )
    assert guarded != UNMET
    (outcome,) = judge([_rule(tmp_path, guarded)], _facts(gpu__util_pct__mean=20.0))
    assert outcome.status == Status.RULED_OUT
    assert outcome.reason == "the GPU only 20% busy"


def test_every_builtin_condition_that_can_rule_its_rule_out_says_so_in_words():
    from diagnose.expressions import expr

    for rule in load_rules(default_rules_dir()):
        for condition in rule.conditions:
            if condition.name in expr.names(rule.when):
                assert condition.unmet is not None, (
                    f"{rule.path}: condition {condition.name} has no `unmet` text (docs/extending.md#a-rule)"
                )


def test_undecidable_when_is_skipped_naming_the_missing_evidence(tmp_path):
    (outcome,) = judge([_rule(tmp_path)], _facts(gpu__util_pct__mean=90.0))
    assert outcome.status == Status.SKIPPED
    assert outcome.missing == ["system: cpu_pct"]


DECISIVE = RULE.replace(
    """contrary:""",
    """  says_so:
    if: engine.stalls >= 1
    weight: 0.8
    decisive: true
    evidence: the engine said so {engine.stalls} times
contrary:""",
)


@pytest.mark.parametrize(
    "others",
    [
        {},  # `when` unknown: nothing else in the dump
        {"gpu__util_pct__mean": 20.0, "host__cpu_pct__mean": 10.0},  # `when` false
    ],
)
def test_a_decisive_condition_settles_its_rule_whatever_when_says(tmp_path, others):
    (outcome,) = judge([_rule(tmp_path, DECISIVE)], _facts(engine__stalls=2, **others))
    assert outcome.status == Status.FIRED and outcome.belief == pytest.approx(0.8) and outcome.score >= 0.95
    assert [(e.text, e.decisive) for e in outcome.evidence] == [("the engine said so 2 times", True)]
    assert outcome.confidence == "high"


def test_a_decisive_condition_that_does_not_hold_leaves_the_rule_as_it_was(tmp_path):
    (outcome,) = judge([_rule(tmp_path, DECISIVE)], _facts(engine__stalls=0, gpu__util_pct__mean=20.0))
    assert outcome.status == Status.RULED_OUT


def test_contrary_evidence_still_weighs_against_a_decisive_condition_and_is_shown(tmp_path):
    facts = _facts(engine__stalls=1, thread__busiest__cpu_pct=5.0)
    (outcome,) = judge([_rule(tmp_path, DECISIVE)], facts)
    assert outcome.status == Status.FIRED
    assert outcome.belief == pytest.approx((0.8 - 0.5) / (1 - 0.5))
    assert [e.text for e in outcome.contrary] == ["busiest thread only 5%"]


@pytest.mark.parametrize(
    "change, field, problem",
    [
        (("weight: 0.8", "weight: 0.5"), "conditions.says_so.weight", "at least 0.8"),
        (
            ("decisive: true", "decisive: true\n    strength: ramp(engine.stalls, 1, 3)"),
            "conditions.says_so.decisive",
            "no strength ramp",
        ),
        (("decisive: true", "decisive: maybe"), "conditions.says_so.decisive", "true or false"),
    ],
)
def test_a_decisive_condition_is_checked_at_load(tmp_path, change, field, problem):
    with pytest.raises(RuleError) as error:
        _rule(tmp_path, DECISIVE.replace(*change))
    assert error.value.field == field and problem in error.value.problem


def test_only_evidence_for_the_cause_can_be_decisive(tmp_path):
    text = RULE.replace(
        "    weight: 0.5\n    evidence: busiest", "    weight: 0.8\n    decisive: true\n    evidence: busiest"
    )
    with pytest.raises(RuleError) as error:
        _rule(tmp_path, text)
    assert error.value.field == "contrary.idle_thread.decisive"


def test_a_decisive_line_is_marked_in_every_report_form(run_cli, tmp_path):
    dump = tmp_path / "dump"
    dump.mkdir()
    (dump / "engine.log").write_text(
        "WARNING 10-10 20:41:04 scheduler.py:1491] Sequence group 7 is preempted by PreemptionMode.RECOMPUTE "
        "mode because there is not enough KV cache space. This can affect the end-to-end performance. "
        "Increase gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. "
        "total_num_cumulative_preemption=1\n"
    )
    code, text, _ = run_cli("file", dump)
    assert code == 0 and "Settled by (decisive on its own):" in text
    code, markdown, _ = run_cli("file", dump, "--format", "markdown")
    assert "- **Settles it:** the engine preempted (vLLM) or retracted (SGLang) requests" in markdown
    code, out, _ = run_cli("file", dump, "--format", "json")
    import json

    [hypothesis] = json.loads(out)["hypotheses"]
    assert hypothesis["id"] == "kv-cache-pressure" and hypothesis["score"] >= 0.7
    assert hypothesis["evidence"][0]["decisive"] is True


def test_a_condition_calling_import_is_rejected_at_load(tmp_path):
    text = RULE.replace("gpu.util_pct.mean >= 80", "__import__('os')")
    with pytest.raises(RuleError) as error:
        _rule(tmp_path, text)
    assert str(error.value).startswith(f"{tmp_path / 'rule.yaml'}: rule cpu-bound-stage: conditions.busy.if:")
    assert "unknown function '__import__'" in str(error.value)


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        (("weight: 0.5", "weight: 2"), "conditions.busy.weight", "expected a number in (0, 1]"),
        (
            ("gpu.util_pct.mean >= 80", "gpu.utilisation >= 80"),
            "conditions.busy",
            "unknown fact 'gpu.utilisation'",
        ),
        (("when: busy and hot", "when: busy and cold"), "when", "names 'cold'"),
        (("when: busy and hot", "when: busy and"), "when", "unexpected end"),
        (("verify: [look]", "verify: []"), "verify", "expected a list of steps"),
        (("pitfalls: [do not panic]", "pitfals: [x]"), "pitfals", "unknown field"),
        (
            ("evidence: GPU at {gpu.util_pct.mean}", "evidence: GPU at {gpu.util_pct.mean.__class__}"),
            "conditions.busy.evidence",
            "unknown fact",
        ),
        (("verify: [look]", "verify: [look: here]"), "verify[0]", "quote a line that contains ': '"),
    ],
)
def test_invalid_rule_errors_name_file_rule_and_field(tmp_path, change, field, problem):
    with pytest.raises(RuleError) as error:
        _rule(tmp_path, RULE.replace(*change))
    assert error.value.rule == "cpu-bound-stage"
    assert error.value.field == field
    assert problem in error.value.problem


def test_invalid_yaml_names_the_line(tmp_path):
    with pytest.raises(RuleError) as error:
        _rule(tmp_path, "id: x\nwhen: [a,\n")
    assert "line 3: not valid YAML" in str(error.value)


def test_yaml_tags_that_would_build_objects_are_refused(tmp_path):
    with pytest.raises(RuleError):
        _rule(tmp_path, "!!python/object/apply:os.system ['id']\n")


def test_rules_command_lists_and_checks(run_cli, tmp_path):
    code, out, _ = run_cli("rules")
    assert code == 0 and "memory-fragmentation" in out
    code, out, _ = run_cli("rules", "check", default_rules_dir())
    assert code == 0 and out.strip().endswith("rules valid")
    bad = tmp_path / "mine"
    bad.mkdir()
    (bad / "broken.yaml").write_text(RULE.replace("weight: 0.4", "weight: heavy"), encoding="utf-8")
    code, out, err = run_cli("rules", "check", bad)
    assert code == 2
    assert err.strip() == (
        "diagnose: error: mine/broken.yaml: rule cpu-bound-stage: conditions.hot.weight: "
        "expected a number in (0, 1], got 'heavy'"
    )


def test_file_accepts_a_users_rule_folder(report_of, tmp_path):
    from tests.conftest import DUMPS

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "gpu-busy.yaml").write_text(
        RULE.replace("when: busy and hot", "when: busy")
        .replace("id: cpu-bound-stage", "id: gpu-busy")
        .replace(">= 80", ">= 10")
        .split("contrary:")[0]
        + "verify: [look]\nremedy: [fix]\npitfalls: [none]\n",
        encoding="utf-8",
    )
    report = report_of(DUMPS / "healthy-steady", "--rules", mine)
    assert [h["id"] for h in report["hypotheses"]] == ["gpu-busy"]
    assert report["hypotheses"][0]["rule"] == "mine/gpu-busy.yaml"


def test_every_rule_has_a_generated_page_in_sync_with_its_yaml(run_cli, tmp_path):

    code, _, _ = run_cli("rules", "docs", tmp_path)
    assert code == 0
    generated = {p.name: p.read_text(encoding="utf-8") for p in tmp_path.glob("*.md")}
    committed = {p.name: p.read_text(encoding="utf-8") for p in (ROOT / "docs" / "rules").glob("*.md")}
    assert generated == committed, "run `diagnose rules docs docs/rules` after editing a rule"
    assert set(generated) == {"README.md"} | {f"{rule.id}.md" for rule in load_rules(default_rules_dir())}


def test_the_readmes_rule_table_is_the_rules_own():
    """The README's table is the rules' ids and titles, as `diagnose rules docs` writes them: a rule added
    or retitled without its row fails here (docs/extending.md#a-rule)."""
    from diagnose.judge.pages import rules_table

    table = rules_table(load_rules(default_rules_dir()), "docs/rules/")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert table in readme, f"README.md's table under '## Rules' should read, from the rules' YAML:\n{table}"


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        (
            ("gpu.util_pct.mean >= 80", "gpu.throttle_reason >= 80"),
            "conditions.busy.if",
            "`gpu.throttle_reason` is text; only numbers can be compared with '>='",
        ),
        (
            ("gpu.util_pct.mean >= 80", "gpu.throttle_reason == 3"),
            "conditions.busy.if",
            "`gpu.throttle_reason` is text and 3 a number: '==' between them is never true",
        ),
        (
            ("gpu.util_pct.mean >= 80", "gpu.util_pct.mean"),
            "conditions.busy.if",
            "is a number; here it must be true or false",
        ),
        (
            ("ramp(host.cpu_pct.mean, 50, 100)", "host.cpu_pct.mean >= 50"),
            "conditions.hot.strength",
            "is true or false; here it must be a number",
        ),
        (
            ("gpu.util_pct.mean >= 80", "gpu.throttle_reason + 1 > 2"),
            "conditions.busy.if",
            "only numbers can be used in '+'",
        ),
        (
            ("gpu.util_pct.mean >= 80", "gpu.util_pct.mean >= 80 and 5"),
            "conditions.busy.if",
            "5 is a number, not a condition for 'and'",
        ),
    ],
)
def test_a_type_error_in_a_condition_is_refused_at_load_naming_file_rule_and_field(
    tmp_path, change, field, problem
):
    with pytest.raises(RuleError) as error:
        _rule(tmp_path, RULE.replace(*change))
    assert error.value.file.endswith("rule.yaml") and error.value.rule == "cpu-bound-stage"
    assert error.value.field == field
    assert problem in error.value.problem


def test_rules_check_exits_2_on_a_type_error_with_one_line(run_cli, tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "bad.yaml").write_text(RULE.replace("gpu.util_pct.mean >= 80", "gpu.throttle_reason > 1"))
    code, _, err = run_cli("rules", "check", folder)
    assert code == 2 and "bad.yaml: rule cpu-bound-stage: conditions.busy.if:" in err and "bug" not in err


def test_text_compared_with_text_and_known_of_anything_type_check(tmp_path):
    text = RULE.replace(
        "gpu.util_pct.mean >= 80", "gpu.throttle_reason == 'sw_power_cap' and known(gpu.util_pct.mean)"
    )
    assert _rule(tmp_path, text).conditions[0].name == "busy"


def test_a_fact_of_another_type_at_run_time_skips_its_rule_not_the_analysis(tmp_path):
    rule = _rule(tmp_path)
    facts = _facts(gpu__util_pct__mean="very high", host__cpu_pct__mean=90.0)  # a bug in a fact's code
    [outcome] = judge([rule], facts)
    assert outcome.status == Status.SKIPPED and "unexpected type" in outcome.missing[0]


CAUSE = """\
id: co-located-contention
title: cause
summary: a cause
when: job
conditions:
  job:
    if: spikes.contender.latency_ratio >= 1.3
    weight: 0.7
    evidence: a job made latency {spikes.contender.latency_ratio} worse
contrary:
  none:
    if: spikes.contender.latency_ratio < 1
    weight: 0.5
    evidence: no job made it worse
verify: [look]
remedy: [fix]
pitfalls: [do not panic]
"""
CONSEQUENCE = (
    RULE
    + """\
explained_by:
  co-located-contention: another process took the CPU the stage runs on
"""
)


def test_a_finding_a_likely_cause_explains_is_explained_away_and_keeps_its_own_score(tmp_path):
    rules = [_rule(tmp_path, CONSEQUENCE, "a.yaml"), _rule(tmp_path, CAUSE, "b.yaml")]
    facts = _facts(gpu__util_pct__mean=90.0, host__cpu_pct__mean=100.0, spikes__contender__latency_ratio=2.0)
    consequence, cause = judge(rules, facts)
    likely = calibrated(0.7)
    assert cause.score == pytest.approx(likely, abs=1e-3) and cause.explained_by is None
    assert consequence.own_score == pytest.approx(likely, abs=1e-3)
    # the chance it is a cause of its own
    assert consequence.score == pytest.approx(likely * (1 - likely), abs=2e-3)
    assert consequence.explained_by == "co-located-contention"
    assert consequence.explanation == "another process took the CPU the stage runs on"


def test_a_cause_that_is_not_likely_explains_nothing(tmp_path):
    weak = CAUSE.replace("weight: 0.7", "weight: 0.45")
    rules = [_rule(tmp_path, CONSEQUENCE, "a.yaml"), _rule(tmp_path, weak, "b.yaml")]
    facts = _facts(gpu__util_pct__mean=90.0, host__cpu_pct__mean=100.0, spikes__contender__latency_ratio=2.0)
    consequence, _ = judge(rules, facts)
    assert consequence.belief == pytest.approx(0.7) and consequence.explained_by is None


def test_explained_by_names_another_root_cause(tmp_path):
    text = RULE + "explained_by:\n  cpu-bound-stage: itself\n"
    with pytest.raises(RuleError) as error:
        _rule(tmp_path, text)
    assert error.value.field == "explained_by.cpu-bound-stage"


def test_the_report_shows_a_consequence_under_its_cause(tmp_path, run_cli):
    import json

    dump = ROOT / "fixtures" / "recorded" / "oversized-batch" / "dump"
    code, text, _ = run_cli("file", dump)
    assert code == 0
    assert "Explains, as its consequences: queue-saturation" in text
    assert "A consequence of oversized-batch, not a second cause" in text
    code, out, _ = run_cli("file", dump, "--format", "json")
    hypotheses = {h["id"]: h for h in json.loads(out)["hypotheses"]}
    saturation = hypotheses["queue-saturation"]
    assert saturation["explained_by"] == "oversized-batch" and saturation["score"] < 0.5
    assert saturation["own_score"] >= 0.5  # the queue did saturate: said, not hidden
    assert "explained_by" not in hypotheses["oversized-batch"]


def test_calibration_keeps_the_likely_line_and_the_order_and_sharpens_the_rest():
    assert calibrated(0.5) == pytest.approx(0.5)
    assert calibrated(0.0) == 0.0 and calibrated(1.0) == 1.0
    beliefs = [0.05, 0.2, 0.35, 0.49, 0.51, 0.6, 0.8, 0.95]
    probabilities = [calibrated(b) for b in beliefs]
    assert probabilities == sorted(probabilities)
    assert all((p < 0.5) == (b < 0.5) for b, p in zip(beliefs, probabilities, strict=True))
    assert calibrated(0.8) > 0.95 and calibrated(0.3) < 0.1  # decisive alone; a hint alone


def test_a_hypothesis_below_likely_says_what_would_raise_it_and_a_likely_one_does_not(report_of):
    """kv-cache-pressure's fixture: the engine's cache is the limit (likely); queue-saturation fires on the
    waiting, below likely, and says the engine-full evidence it looked for and did not see."""
    from tests.conftest import DUMPS

    hypotheses = {h["id"]: h for h in report_of(DUMPS / "kv-cache-pressure")["hypotheses"]}
    assert (
        hypotheses["kv-cache-pressure"]["score"] >= 0.5 and "not_seen" not in hypotheses["kv-cache-pressure"]
    )
    below = hypotheses["queue-saturation"]
    assert below["score"] < 0.5
    assert any("requests waited with the engine full" in line for line in below["not_seen"])


def test_a_count_of_one_takes_the_singular_in_every_template():
    """One way to write a count in a rule's words: "{trace.kernels} kernels" reads "1 kernel" for one,
    and no rule writes "(s)" for the reader to sort out."""
    from diagnose.judge.template import compile_template, render

    facts = _facts(trace__kernels=1, server__processes=1, trace__pageable_copies=1, oom__count=1)
    facts.add("batch.wait_to_forward", 1.0, "test")
    said = [
        render(compile_template(text), facts)
        for text in (
            "{trace.kernels} kernels ran",
            "in {server.processes} processes",
            "{trace.pageable_copies} copies",
            "{oom.count} OOMs",
            "{batch.wait_to_forward} as long",
        )
    ]
    assert said == ["1 kernel ran", "in 1 process", "1 copy", "1 OOM", "1.00x as long"]
    texts = [
        text.text
        for rule in load_rules(default_rules_dir())
        for c in (*rule.conditions, *rule.contrary, *rule.checks)
        for text in (getattr(c, "evidence", None), getattr(c, "unmet", None), getattr(c, "says", None))
        if text is not None
    ]
    assert [t for t in texts if "(s)" in t or "(es)" in t] == []
    from diagnose.facts.catalogue import CATALOGUE, LIVE

    meanings = [f"{name}: {spec.meaning}" for name, spec in {**CATALOGUE, **LIVE}.items()]
    assert [m for m in meanings if "(s)" in m or "(es)" in m] == []  # verify says them: "not measured (...)"


@pytest.mark.parametrize("value", [0, 1, 2])
def test_every_rules_words_read_whole_with_counts_of_zero_one_and_two(value):
    """Each evidence, unmet and check text of every rule, its figures all 0, 1 or 2: nothing left as a
    hole ("none" where a number belongs), no "(s)", and no "1 runs" (issue 59)."""
    import re

    from diagnose.facts.catalogue import CATALOGUE, LIVE
    from diagnose.judge.template import render

    specs = CATALOGUE | LIVE
    words = [
        text
        for rule in load_rules(default_rules_dir())
        for c in (*rule.conditions, *rule.contrary, *rule.checks)
        for text in (getattr(c, "evidence", None), getattr(c, "unmet", None), getattr(c, "says", None))
        if text is not None
    ]
    not_plurals = {"is", "was", "as", "its", "has", "does", "this", "thus", "plus"}
    wrong = []
    for text in words:
        facts = Facts()
        for name in text.facts:
            unit = specs[name].unit
            facts.add(name, "pid 42 (python)" if unit == "name" else 1.7e9 if unit == "time" else value, "t")
        said = render(text, facts)
        ones = [
            m.group(0)
            for m in re.finditer(r"(?<![\d.,])1 ([A-Za-z]+s)\b", said or "")
            if not m.group(1).endswith("ss") and m.group(1) not in not_plurals
        ]
        if said is None or "(s)" in said or said.count("none") != text.text.count("none") or ones:
            wrong.append(f"{said} ({ones})")
    assert wrong == []
