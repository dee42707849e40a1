"""A verification as terminal text or JSON."""

from __future__ import annotations

import json
from dataclasses import asdict

from diagnose.verify.run import Verification

VERIFY_FORMAT = "diagnose-verify/1"


def render(verification: Verification, form: str) -> str:
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
    return "\n".join(out).rstrip() + "\n"
