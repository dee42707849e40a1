"""Rules and dumps are data: nothing in the product evaluates, unpickles or loads YAML unsafely."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import DUMPS, ROOT

FORBIDDEN = re.compile(
    r"\b(eval|exec)\s*\(|\bpickle\b|\bmarshal\b|yaml\.load\s*\((?![^)]*SafeLoader)|yaml\.unsafe_load|"
    r"\bUnsafeLoader\b|\bFullLoader\b"
)


def test_no_eval_exec_pickle_or_unsafe_yaml_in_the_product():
    offenders = []
    for folder in ("diagnose", "fixtures", "benchmarks"):
        for path in (ROOT / folder).rglob("*.py"):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                if FORBIDDEN.search(line):
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []


def test_headless_analysis_does_not_import_the_tui():
    script = (
        "import sys\n"
        "from diagnose.cli import main\n"
        f"main(['file', {str(DUMPS / 'healthy-steady')!r}, '--format', 'json'])\n"
        "assert not any(m == 'textual' or m.startswith('textual.') for m in sys.modules), 'textual imported'\n"
        "assert 'matplotlib' not in sys.modules, 'matplotlib imported without pictures asked for'\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
