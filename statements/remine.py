"""Re-mine a writer's source tree against its catalogue: a new release is a diff, not a hunt.

    python statements/remine.py ~/src/vllm --writer vllm          # what vLLM's tree writes and the
                                                                  # catalogue lacks, and the reverse
    python statements/remine.py ~/src/sglang --writer sglang --all   # every candidate, matched or not

Walks the tree's source files (.py, .rs, .cc/.cpp/.c/.h/.cu, .go), takes each string literal that
speaks of a cause (a timeout or watchdog, KV-cache room, preemption, memory, a death, a start or
readiness, throttling, a device fault) and looks for it in the writer's catalogue file
(statements/WRITER.yaml). It prints:

- ``lacks``: literals in the tree that no template of the writer's accounts for. Read each in its
  file: a message that states a cause goes into the catalogue with its file and releases; chatter
  does not.
- ``gone``: templates whose text the tree no longer holds (reworded or removed in this release):
  keep them (older releases still write them) and say the last release in ``releases``.

It reads text only; nothing in the tree is run.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from diagnose.statements import Statement, load_statements_file  # noqa: E402

SOURCE_SUFFIXES = (".py", ".rs", ".cc", ".cpp", ".c", ".h", ".hpp", ".cu", ".go")
CAUSE_WORDS = re.compile(
    r"time[sd]? ?out|watchdog|heartbeat|hang|stall|preempt|retract|evict|swap(?:ped|ping)? out"
    r"|out of memory|\bOOM\b|KV[ -]?cache|cache blocks?|free blocks|not enough (?:memory|space|blocks)"
    r"|died|dead\b|crash|killed|terminat|fallen off|\bXid\b|throttl|slowdown"
    r"|ready|started|listening|failed to (?:start|load|initiali[sz]e)",
    re.IGNORECASE,
)
# A string literal on one line: "...", '...', with an f/r/b prefix or none (C++ and Rust strings too)
_LITERAL = re.compile(r"""(?<![\w])[frbuFRBU]{0,2}("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')""")
_PLACEHOLDER = re.compile(r"%[-+ #0-9.*]*[a-zA-Z]|\{[^{}]*\}")
_ESCAPE = re.compile(r"\\[ntr]")  # a line break or tab written in the literal: white space in the log
_MIN_TEXT = 10  # literals with less text than this (a key, a word) are not messages


def literals(tree: Path) -> Iterator[tuple[str, int, str]]:
    """(file, line, literal) for each string literal in the tree long enough to be a message."""
    for path in sorted(tree.rglob("*")):
        if path.suffix not in SOURCE_SUFFIXES or not path.is_file() or "test" in path.parts[-1].lower():
            continue
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            for match in _LITERAL.finditer(line):
                literal = _ESCAPE.sub(" ", match.group(1)[1:-1])
                if len(_PLACEHOLDER.sub("", literal).strip()) >= _MIN_TEXT:
                    yield str(path.relative_to(tree)), number, literal


def _words(text: str) -> str:
    """A template or literal reduced to its literal words: placeholders and spacing do not count."""
    return " ".join(_PLACEHOLDER.sub(" ", text).split())


def _accounted(literal: str, templates: list[tuple[Statement, str]]) -> Statement | None:
    words = _words(literal)
    for statement, template in templates:
        if template and (template in words or (len(words) >= _MIN_TEXT and words in template)):
            return statement
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("tree", type=Path, help="a checkout of the writer's source")
    parser.add_argument("--writer", required=True, help="the catalogue file's name: statements/WRITER.yaml")
    parser.add_argument(
        "--all", action="store_true", help="also list the literals the catalogue accounts for"
    )
    args = parser.parse_args(argv)
    folder = Path(__file__).resolve().parent
    catalogue = folder / f"{args.writer}.yaml"
    if not catalogue.is_file():
        known = ", ".join(sorted(p.stem for p in folder.glob("*.yaml")))
        parser.error(f"no statements/{args.writer}.yaml; the writers are: {known}")
    if not args.tree.is_dir():
        parser.error(f"{args.tree}: not a folder")
    mine = load_statements_file(catalogue)
    templates = [(s, _words(s.template)) for s in mine]
    seen: set[str] = set()
    lacks = 0
    for file, number, literal in literals(args.tree):
        statement = _accounted(literal, templates)
        if statement is not None:
            seen.add(statement.id)
            if args.all:
                print(f"has\t{statement.id}\t{file}:{number}\t{literal}")
            continue
        if not CAUSE_WORDS.search(literal):
            continue
        lacks += 1
        print(f"lacks\t{file}:{number}\t{literal}")
    gone = [s for s in mine if s.id not in seen]
    for statement in gone:
        print(f"gone\t{statement.id}\t{statement.file}\t{statement.template}")
    print(f"{lacks} literal(s) the catalogue lacks; {len(gone)} of {len(mine)} template(s) not in this tree")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
