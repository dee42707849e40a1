"""A paste is sections: one terminal capture may hold several tools' outputs, each after its command.

``nvidia-smi -L``, then a ``--query-gpu`` loop, then ``nvidia-smi pmon``; a scrape, then a log: one
importer would claim the file and drop the rest. The file is cut before each command line (a shell
prompt and its command, or a bare command of a tool whose output people paste) and each piece is
offered to the importers on its own. The cut is used only where the pieces are different formats:
a file of one format with prompts between its snapshots is read whole, as before.
"""

from __future__ import annotations

import re

from diagnose.importers.mend_noise import PROMPT

# A tool's command written without a prompt, at the start of a line (after `sudo`, a `watch`)
_BARE_COMMAND = re.compile(
    r"^\s*(?:sudo\s+)?(?:watch\s+(?:-n\s*\S+\s+)?)?"
    r"(?:nvidia-smi|dcgmi|curl|dmesg|journalctl|kubectl\s+logs|docker\s+logs|tail|cat)(?:\s|$)"
)


def sections(text: str) -> list[str]:
    """The text cut before each command line (each piece keeps its command line); the text alone where
    it has no command line after its first line."""
    lines = text.splitlines(keepends=True)
    starts = [
        0,
        *(n for n, line in enumerate(lines) if n and (PROMPT.match(line) or _BARE_COMMAND.match(line))),
    ]
    pieces = ("".join(lines[a:b]) for a, b in zip(starts, [*starts[1:], len(lines)], strict=True))
    return [piece for piece in pieces if piece.strip()]
