"""A small transformer-like model, built as an ONNX graph with random weights, run by onnxruntime.

Nothing is downloaded: the graph is made with ``onnx.helper`` at start-up. One
forward over a padded batch of token ids costs a few to a few tens of
milliseconds on one core, and grows with the batch and the sequence length (the
attention is quadratic in it), as a real model's does. The output is the
logits of the last position of each sequence, from which the service takes its
answer tokens.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

VOCAB = 2_000
WIDTH = 256
LAYERS = 4
MAX_LEN = 2048  # the model's context: longer prompts are cut to their last MAX_LEN tokens


def build_graph(seed: int = 0) -> onnx.ModelProto:
    """Embedding, LAYERS blocks of single-head attention and an MLP with residuals, a vocabulary head."""
    rng = np.random.default_rng(seed)
    weights: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def weight(name: str, *shape: int, scale: float | None = None) -> str:
        scale = scale if scale is not None else 1 / np.sqrt(shape[0])
        weights.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def node(op: str, inputs: list[str], output: str, **attrs) -> str:
        nodes.append(helper.make_node(op, inputs, [output], **attrs))
        return output

    weight("embedding", VOCAB, WIDTH, scale=0.1)
    weight("position", MAX_LEN, WIDTH, scale=0.1)
    weights.append(numpy_helper.from_array(np.array([1 / np.sqrt(WIDTH)], np.float32), "attn_scale"))
    weights.append(numpy_helper.from_array(np.array([0], np.int64), "zero"))
    weights.append(numpy_helper.from_array(np.array([1], np.int64), "one"))
    weights.append(numpy_helper.from_array(np.array([-1], np.int64), "minus_one"))
    weights.append(numpy_helper.from_array(np.array([np.iinfo(np.int64).max], np.int64), "end"))

    hidden = node("Gather", ["embedding", "ids"], "embedded")
    length = node("Shape", ["ids"], "ids_shape", start=1, end=2)
    positions = node("Slice", ["position", "zero", length], "positions")
    hidden = node("Add", [hidden, positions], "h0")
    for layer in range(LAYERS):
        p = f"l{layer}_"
        q = node("MatMul", [hidden, weight(p + "wq", WIDTH, WIDTH)], p + "q")
        k = node("MatMul", [hidden, weight(p + "wk", WIDTH, WIDTH)], p + "k")
        v = node("MatMul", [hidden, weight(p + "wv", WIDTH, WIDTH)], p + "v")
        kt = node("Transpose", [k], p + "kt", perm=[0, 2, 1])
        scores = node("Mul", [node("MatMul", [q, kt], p + "qk"), "attn_scale"], p + "scores")
        attended = node("MatMul", [node("Softmax", [scores], p + "probs", axis=-1), v], p + "attended")
        projected = node("MatMul", [attended, weight(p + "wo", WIDTH, WIDTH)], p + "projected")
        hidden = node("Add", [hidden, projected], p + "h_attn")
        up = node("Relu", [node("MatMul", [hidden, weight(p + "w1", WIDTH, 4 * WIDTH)], p + "up")], p + "act")
        down = node("MatMul", [up, weight(p + "w2", 4 * WIDTH, WIDTH)], p + "down")
        hidden = node("Add", [hidden, down], p + "h")
    last = node("Slice", [hidden, "minus_one", "end", "one"], "last")  # [batch, 1, width]
    node("MatMul", [last, weight("head", WIDTH, VOCAB)], "logits")

    graph = helper.make_graph(
        nodes,
        "testbed-lm",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "length"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1, VOCAB])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # readable by every onnxruntime since 1.10
    onnx.checker.check_model(model)
    return model


class Model:
    """An onnxruntime session over the graph, on one thread: its cost is one core's, measurable."""

    def __init__(self, seed: int = 0, device: str = "cpu") -> None:
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if device == "cuda" else None
        self._session = ort.InferenceSession(
            build_graph(seed).SerializeToString(), options, providers=providers or ["CPUExecutionProvider"]
        )

    def forward(self, batch: list[list[int]]) -> np.ndarray:
        """Logits [len(batch), VOCAB] of each sequence's last position; shorter ones are left-padded."""
        width = max(1, max(len(ids) for ids in batch))
        padded = np.zeros((len(batch), width), dtype=np.int64)
        for row, ids in enumerate(batch):
            if ids:
                padded[row, width - len(ids) :] = ids
        return self._session.run(["logits"], {"ids": padded})[0][:, 0, :]
