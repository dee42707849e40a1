"""Damage a real sample the way evidence gets damaged on its way to us, for fuzzing.

Each mutation is a plain function of bytes and a seeded random generator, so a
failing case is reproduced from (sample, mutations, seed). Shared by the short
property tests and ``benchmarks/bench_fuzz.py``.
"""

from __future__ import annotations

import random
from collections.abc import Callable

Mutation = Callable[[bytes, random.Random], bytes]


def cut_line(data: bytes, rng: random.Random) -> bytes:
    """One line cut short at a random column (an index that truncated the post)."""
    lines = data.split(b"\n")
    index = rng.randrange(len(lines))
    lines[index] = lines[index][: rng.randrange(len(lines[index]) + 1)]
    return b"\n".join(lines)


def truncate(data: bytes, rng: random.Random) -> bytes:
    """The file ends anywhere, mid-line or mid-character."""
    return data[: rng.randrange(len(data) + 1)]


def duplicate_lines(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    start = rng.randrange(len(lines))
    end = min(len(lines), start + rng.randint(1, 5))
    return b"\n".join(lines[:end] + lines[start:end] + lines[end:])


def shuffle_lines(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    rng.shuffle(lines)
    return b"\n".join(lines)


def drop_lines(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    return b"\n".join(line for line in lines if rng.random() > 0.2)


def flip_bytes(data: bytes, rng: random.Random) -> bytes:
    """A few bytes changed at random: a bad disk, a bad copy, a stray keystroke."""
    if not data:
        return data
    damaged = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        damaged[rng.randrange(len(damaged))] = rng.randrange(256)
    return bytes(damaged)


def swap_digits(data: bytes, rng: random.Random) -> bytes:
    """Numbers replaced by other numbers, huge, negative or not numbers at all."""
    replacements = [b"0", b"-1", b"1e308", b"nan", b"inf", b"-", b"N/A", b"99999999999999999999", b"3.5e-9"]
    out, index = bytearray(), 0
    while index < len(data):
        if data[index : index + 1].isdigit() and rng.random() < 0.1:
            end = index
            while end < len(data) and (data[end : end + 1].isdigit() or data[end : end + 1] == b"."):
                end += 1
            out += rng.choice(replacements)
            index = end
        else:
            out += data[index : index + 1]
            index += 1
    return bytes(out)


def prompt_and_quote(data: bytes, rng: random.Random) -> bytes:
    """Pasted: a prompt above, a Markdown quote or fence around, CRLF line ends."""
    choice = rng.randrange(4)
    if choice == 0:
        return b"$ some-command --with args\n" + data
    if choice == 1:
        return b"\n".join(b"> " + line for line in data.split(b"\n"))
    if choice == 2:
        return b"```\n" + data + b"\n```\n"
    return data.replace(b"\n", b"\r\n")


def reencode(data: bytes, rng: random.Random) -> bytes:
    """The same text saved as UTF-16 (Windows), Latin-1, or with a byte-order mark."""
    text = data.decode("utf-8", errors="replace")
    encoding = rng.choice(["utf-16", "latin-1", "utf-8-sig", "cp1252"])
    return text.encode(encoding, errors="replace")


MUTATIONS: tuple[Mutation, ...] = (
    cut_line,
    truncate,
    duplicate_lines,
    shuffle_lines,
    drop_lines,
    flip_bytes,
    swap_digits,
    prompt_and_quote,
    reencode,
)


def mutate(data: bytes, names: list[int], seed: int) -> bytes:
    """Apply MUTATIONS[i] for each i in ``names``, in order, from one seed."""
    rng = random.Random(seed)
    for index in names:
        data = MUTATIONS[index % len(MUTATIONS)](data, rng)
    return data
