"""Credentials never land in a dump: command lines are recorded with their secrets replaced.

Servers are often started with a key on the command line (``--api-key``,
``--hf-token``, ``HF_TOKEN=...``, a URL with a password in it). An option or
variable one of whose word parts is key, token, secret, password or
credential keeps its name and loses its value.
"""

from __future__ import annotations

import re

MASK = "***"
# A word part (between -, _ and .) that names a secret: --api-key, --hf-token, DB_PASSWORD; not
# --max-tokens or --tokenizer-mode, which are settings worth keeping.
_PART = r"(?:key|apikey|token|secret|passwd|password|pwd|credentials?|auth)"
_SECRET = rf"(?:[a-z0-9]+[-_.])*{_PART}(?:[-_.][a-z0-9]+)*"
# --api-key=VALUE, api_key=VALUE, HF_TOKEN=VALUE
_ASSIGNED = re.compile(rf"(?i)(^|\s)(-{{0,2}}{_SECRET})=(\S+)")
# --api-key VALUE (the next word, unless it is another option)
_FOLLOWED = re.compile(rf"(?i)(^|\s)(-{{1,2}}{_SECRET})(\s+)(?!-)(\S+)")
# scheme://user:password@host
_USERINFO = re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://[^\s:/@]+:)([^\s@/]+)(@)")


def redact_cmdline(cmdline: str) -> str:
    cmdline = _USERINFO.sub(rf"\1{MASK}\3", cmdline)
    cmdline = _ASSIGNED.sub(rf"\1\2={MASK}", cmdline)
    return _FOLLOWED.sub(rf"\1\2\3{MASK}", cmdline)
