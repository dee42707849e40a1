"""``diagnose verify``: run a hypothesis's read-only checks on the live host and say what each found."""

from __future__ import annotations

from diagnose.verify.probes import Found, Host
from diagnose.verify.run import CheckOutcome, Verification, Verified, verify, verify_report

__all__ = ["CheckOutcome", "Found", "Host", "Verification", "Verified", "verify", "verify_report"]
