"""``diagnose rules``: list, show, check, test and document the rules."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from diagnose.commands.options import Subcommands, add_debug
from diagnose.errors import DiagnoseError, ExitCode, InputError
from diagnose.units import counted


def add_parser(commands: Subcommands) -> None:
    command = commands.add_parser(
        "rules",
        help="list, check or explain the rules",
        description=(
            "list: the rules in use; show ID: a rule's YAML and where it is; check DIR: validate a "
            "rule folder; test [DIR]: run the rule tests in DIR/tests/ (default: the built-in rules'); "
            "facts: what rules may use; docs DIR: write one Markdown page per rule, generated from its YAML."
        ),
    )
    command.add_argument(
        "action", nargs="?", choices=("list", "show", "check", "test", "facts", "docs"), default="list"
    )
    command.add_argument("folder", nargs="?", help="the rule folder (check, docs) or the rule's id (show)")
    command.add_argument("--rules", type=Path, metavar="DIR", help="list the rules in DIR")
    add_debug(command)
    command.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from diagnose.facts.catalogue import CATALOGUE
    from diagnose.judge import default_rules_dir, load_rules
    from diagnose.judge.ids import root_cause_ids

    if args.action == "show":
        if args.folder is None:
            raise InputError("rules show needs a rule id: diagnose rules show ID (diagnose rules lists them)")
        by_id = {rule.id: rule for rule in load_rules(args.rules or default_rules_dir())}
        if args.folder not in by_id:
            raise InputError(f"no rule {args.folder!r}; the rules are: {', '.join(sorted(by_id))}")
        rule = by_id[args.folder]
        print(f"# {rule.source_file}")
        sys.stdout.write(Path(rule.source_file).read_text(encoding="utf-8"))
        return ExitCode.OK
    if args.folder is not None:
        args.folder = Path(args.folder)
    if args.action == "facts":
        for name, spec in CATALOGUE.items():
            print(f"{name:<42} {spec.unit:<6} {spec.meaning}  [needs {spec.needs.text}]")
        from diagnose.facts.catalogue import LIVE, PROBES

        print("\nwhat diagnose verify's probes read on the live host (a rule's checks only):")
        for probe, names in PROBES.items():
            for name in names:
                spec = LIVE[name]
                print(f"{name:<42} {spec.unit:<6} {spec.meaning}  [probe {probe}: {spec.needs.text}]")
        return ExitCode.OK
    if args.action == "check":
        if args.folder is None:
            raise DiagnoseError("rules check needs a folder: diagnose rules check DIR")
        rules = load_rules(args.folder)
        for rule in rules:
            note = "" if rule.id in root_cause_ids() else "  (id not in the standard list: document it)"
            print(f"ok  {rule.path}  {rule.id}{note}")
        print(f"{counted(len(rules), 'rule')} valid")
        return ExitCode.OK
    if args.action == "test":
        from diagnose.judge.testing import run_rule_tests

        folder = args.folder or args.rules or default_rules_dir()
        results = run_rule_tests(load_rules(folder), folder / "tests")
        for result in results:
            mark = "ok  " if result.passed else "FAIL"
            print(f"{mark} {Path(result.file).name}: {result.case}: {result.got}")
        failed = sum(not r.passed for r in results)
        print(f"{len(results) - failed} passed, {failed} failed")
        return ExitCode.FINDING_AT_THRESHOLD if failed else ExitCode.OK
    if args.action == "docs":
        from diagnose.judge.pages import rule_page, rules_table

        if args.folder is None:
            raise DiagnoseError("rules docs needs a folder to write the pages into: diagnose rules docs DIR")
        args.folder.mkdir(parents=True, exist_ok=True)
        rules = load_rules(args.rules or default_rules_dir())
        for rule in rules:
            (args.folder / f"{rule.id}.md").write_text(rule_page(rule), encoding="utf-8")
        heading = "# The rules\n\n*Generated from the rule files by `diagnose rules docs`.*\n\n"
        index = heading + rules_table(rules)
        (args.folder / "README.md").write_text(index, encoding="utf-8")
        print(f"wrote the rule pages and their index (README.md) to {args.folder}")
        return ExitCode.OK
    folder = args.rules or args.folder or default_rules_dir()
    rules = load_rules(folder)
    width = max((len(rule.id) for rule in rules), default=0) + 2
    for rule in rules:
        print(f"{rule.id:<{width}}{rule.title}")
    return ExitCode.OK
