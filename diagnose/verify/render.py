"""A verification as terminal text or JSON."""

from __future__ import annotations

import json
import textwrap
from dataclasses import asdict

from diagnose.verify.run import Verification

VERIFY_FORMAT = "diagnose-verify/1"


def render(verification: Verification, form: str, width: int | None = None) -> str:
    """The verification as text (its lines wrapped to ``width``, never where None) or JSON."""
    if form == "json":
        return json.dumps({"format": VERIFY_FORMAT, **asdict(verification)}, indent=2) + "\n"
    out = [f"diagnose verify: {verification.dump}"]
    if verification.host:
        out.append(verification.host)
    out.append("")
    if verification.not_run:
        out.append(f"Nothing was checked: {verification.not_run}.")
    elif not verification.verified:
        out.append("No hypothesis to verify: the dump gives none (nothing likely, no runner-up).")
    for item in verification.verified:
        moved = (
            f"{item.score:.2f} -> {item.verified_score:.2f}"
            if item.checks and abs(item.verified_score - item.score) >= 0.005
            else f"{item.score:.2f}"
        )
        out.append(f"{item.cause}  {moved}")
        if item.note:
            out.append(f"  {item.note}")
        for check in item.checks:
            out.append(f"  [{check.outcome}] {check.says}")
            if check.test:
                out.append(
                    f"      {'test' if check.outcome in ('confirms', 'refutes') else 'why'}: {check.test}"
                )
            out.append(f"      {'read' if check.outcome != 'not run' else 'not run'}: {check.source}")
            if check.outcome in ("confirms", "refutes"):
                sign = "+" if check.outcome == "confirms" else "-"
                out.append(f"      weight: {sign}{check.weight:g}")
        out.append("")
    for found in verification.probes:
        if found.details:
            out.append(f"{found.probe} read:")
            out += [f"  {line}" for line in found.details]
            out.append("")
    return "\n".join(_wrapped(out, width)).rstrip() + "\n"


def _wrapped(lines: list[str], width: int | None) -> list[str]:
    """Each line wrapped to ``width``, its continuation indented under its text."""
    if width is None:
        return lines
    out = []
    for line in lines:
        indent = " " * (len(line) - len(line.lstrip(" ")))
        body = line.lstrip(" ")
        hang = indent + ("    " if body.startswith("[") else "  ")
        wrapped = textwrap.wrap(
            body,
            max(width, 60),
            initial_indent=indent,
            subsequent_indent=hang,
            break_long_words=False,
            break_on_hyphens=False,
        )
        out += wrapped or [""]
    return out
