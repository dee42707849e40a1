"""A real BPE tokenizer (Hugging Face ``tokenizers``), trained at start-up on local text.

Nothing is downloaded: the training text is the Python standard library's own
sources, which every Python installation has. The ``slow`` path is the fault
``cpu-bound-stage`` injects: the same merges applied by the reference BPE loop
in pure Python, without a pre-tokenizer, the kind of fallback a service gets
when the fast tokenizer is missing or a tokenisation hook is written in Python.
"""

from __future__ import annotations

import json
import sysconfig
import unicodedata
from collections.abc import Iterator
from pathlib import Path

from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from testbed.model import VOCAB

_TRAINING_BYTES = 3_000_000


def _stdlib_text(limit: int = _TRAINING_BYTES) -> Iterator[str]:
    """Up to ``limit`` bytes of the standard library's sources, in a fixed order."""
    taken = 0
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        yield text
        taken += len(text)
        if taken >= limit:
            return


def train() -> Tokenizer:
    tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["[PAD]", "[UNK]"], show_progress=False)
    tokenizer.train_from_iterator(_stdlib_text(), trainer)
    return tokenizer


def words() -> list[str]:
    """Words to make prompts of: the training text's, so that prompts tokenise like real text."""
    seen: list[str] = []
    for text in _stdlib_text(400_000):
        seen.extend(text.split())
    return seen


class TextCodec:
    """Encode with the fast tokenizer, or (``slow``) with a pure-Python BPE over the same merges.

    The slow path is the classic reference loop (find the best-ranked pair, merge,
    repeat), in Python and fed the whole prompt: the same tokens, about sixty
    times slower, and slower still the longer the prompt.
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer
        self._vocab = tokenizer.get_vocab()
        model = json.loads(tokenizer.to_str())["model"]
        self._ranks = {tuple(_pair(merge)): rank for rank, merge in enumerate(model["merges"])}
        self._unknown = self._vocab["[UNK]"]

    def encode(self, text: str, slow: bool = False) -> list[int]:
        return self._slow_encode(text) if slow else self._tokenizer.encode(text).ids

    def decode(self, ids: list[int]) -> str:
        return self._tokenizer.decode(ids)

    def _slow_encode(self, text: str) -> list[int]:
        # The bug this path carries: no pre-tokenizer, so the whole prompt is one "word" for the
        # merge loop, whose cost grows with the square of its length. The tokens are the same,
        # since no merge crosses a space or a line break.
        pieces = self._merge(unicodedata.normalize("NFC", text))
        return [self._vocab.get(piece, self._unknown) for piece in pieces if not piece.isspace()]

    def _merge(self, word: str) -> list[str]:
        """The reference BPE loop: rank every adjacent pair, merge the best everywhere, repeat."""
        pieces = tuple(word)
        pairs = _pairs(pieces)
        while pairs:
            best = min(pairs, key=lambda pair: self._ranks.get(pair, _NEVER))
            if best not in self._ranks:
                break
            first, second = best
            merged: list[str] = []
            i = 0
            while i < len(pieces):
                try:
                    j = pieces.index(first, i)
                except ValueError:
                    merged.extend(pieces[i:])
                    break
                merged.extend(pieces[i:j])
                i = j
                if pieces[i] == first and i < len(pieces) - 1 and pieces[i + 1] == second:
                    merged.append(first + second)
                    i += 2
                else:
                    merged.append(pieces[i])
                    i += 1
            pieces = tuple(merged)
            pairs = _pairs(pieces) if len(pieces) > 1 else set()
        return list(pieces)


def _pairs(pieces: tuple[str, ...]) -> set[tuple[str, str]]:
    return set(zip(pieces, pieces[1:], strict=False))


_NEVER = 1 << 62


def _pair(merge: str | list[str]) -> list[str]:
    """A merge as two pieces: ``tokenizers`` writes ``"a b"`` in older releases, ``["a", "b"]`` in newer."""
    return merge.split(" ", 1) if isinstance(merge, str) else list(merge)
