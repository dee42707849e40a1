"""A tiny llama-architecture model with random weights, written as GGUF by the ``gguf`` package.

Nothing is downloaded. The model is what llama.cpp's server loads as any other
llama model (tensor names and shapes as ``src/llama-arch.cpp`` and
``src/llama-model.cpp`` ask): two layers, width 128, four heads, a vocabulary
of 2,048 pieces (the 256 ``<0xXX>`` byte pieces the server needs, the
special tokens, and word pieces cut from the testbed's word list, so a prompt
of English-like words costs a token or two a word, as with a real tokenizer),
and a ChatML template so the chat endpoint works. Its answers are noise, but it
generates them at a real engine's pace through the real scheduler, which is
all the diagnosis needs. The output rows of the special tokens are zeroed so
that no answer ends early: every request runs to its ``max_tokens``.

The weights are drawn from a seed: every run, on every machine, serves the
same model.
"""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np

LAYERS = 2
WIDTH = 128
HEADS = 4
FEED_FORWARD = 352
VOCAB = 2_048
TRAINED_CONTEXT = 8_192  # the model's n_ctx_train: the server's -c may be anything up to it
_SPECIALS = ("<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>")
_SPACE = "\u2581"  # SentencePiece's word boundary
_CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# gguf's token types (gguf.TokenType): what the tokenizer may produce from text, and what it may not.
_NORMAL, _UNKNOWN, _CONTROL, _BYTE = 1, 2, 3, 6


def vocabulary(words: list[str], size: int = VOCAB) -> tuple[list[str], list[float], list[int]]:
    """Pieces, scores and types of a SentencePiece-style vocabulary of ``size`` pieces.

    llama.cpp's SPM tokenizer merges neighbouring symbols into the best-scored
    piece the vocabulary holds, so a word becomes one piece only if every prefix
    of it is a piece too: the common words enter with their prefixes, longer
    pieces scored higher. Characters with no piece fall back to the byte pieces.
    """
    pieces = list(_SPECIALS) + [f"<0x{b:02X}>" for b in range(256)]
    types = [_UNKNOWN, _CONTROL, _CONTROL, _CONTROL, _CONTROL] + [_BYTE] * 256
    taken = set(pieces)
    printable = [chr(c) for c in range(33, 127)]
    candidates = [_SPACE, *printable]
    counts = collections.Counter(w.lower() for w in words if w.isascii() and w.isalpha())
    for word, _ in counts.most_common():
        candidates.extend(_SPACE + word[:end] for end in range(1, len(word) + 1))
    for piece in candidates:
        if len(pieces) >= size:
            break
        if piece not in taken:
            taken.add(piece)
            pieces.append(piece)
            types.append(_NORMAL)
    scores = [
        0.0 if kind != _NORMAL else float(len(piece)) for piece, kind in zip(pieces, types, strict=True)
    ]
    return pieces, scores, types


def write_model(path: Path, words: list[str], seed: int = 0) -> Path:
    """Write the model to ``path`` (a ``.gguf`` file) and return it; the same seed, the same bytes."""
    import gguf  # the testbed's extra: only the LLM scenarios need it

    rng = np.random.default_rng(seed)
    pieces, scores, types = vocabulary(words)

    def weight(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)

    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    writer = gguf.GGUFWriter(str(partial), "llama")
    writer.add_name("diagnose testbed tiny llama")
    writer.add_context_length(TRAINED_CONTEXT)
    writer.add_embedding_length(WIDTH)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FEED_FORWARD)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(HEADS)
    writer.add_rope_dimension_count(WIDTH // HEADS)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(0)  # every tensor F32
    writer.add_tokenizer_model("llama")
    writer.add_token_list(pieces)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_chat_template(_CHATML)

    output = weight(VOCAB, WIDTH)
    output[: len(_SPECIALS)] = 0.0  # no end-of-text ever sampled: answers run to max_tokens
    writer.add_tensor("token_embd.weight", weight(VOCAB, WIDTH))
    writer.add_tensor("output_norm.weight", np.ones(WIDTH, np.float32))
    writer.add_tensor("output.weight", output)
    for layer in range(LAYERS):
        block = f"blk.{layer}"
        writer.add_tensor(f"{block}.attn_norm.weight", np.ones(WIDTH, np.float32))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            writer.add_tensor(f"{block}.{name}.weight", weight(WIDTH, WIDTH))
        writer.add_tensor(f"{block}.ffn_norm.weight", np.ones(WIDTH, np.float32))
        writer.add_tensor(f"{block}.ffn_gate.weight", weight(FEED_FORWARD, WIDTH))
        writer.add_tensor(f"{block}.ffn_up.weight", weight(FEED_FORWARD, WIDTH))
        writer.add_tensor(f"{block}.ffn_down.weight", weight(WIDTH, FEED_FORWARD))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    partial.replace(path)
    return path
