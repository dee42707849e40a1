"""A small transformer-like model, built as an ONNX graph with random weights, run by onnxruntime.

Nothing is downloaded: the graph is made with ``onnx.helper`` at start-up. One
forward over a padded batch of token ids costs a few to a few tens of
milliseconds on one core, and grows with the batch and the sequence length (the
attention is quadratic in it), as a real model's does. The output is the
logits of the last position of each sequence, from which the service takes its
answer tokens.
"""

from __future__ import annotations

import ctypes
import functools
import gc
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

VOCAB = 2_000
WIDTH = 256
LAYERS = 4
MAX_LEN = 2048  # the model's context: longer prompts are cut to their last MAX_LEN tokens


def build_graph(seed: int = 0, decomposed: bool = False) -> onnx.ModelProto:
    """Embedding, LAYERS blocks of single-head attention and an MLP with residuals, a vocabulary head.

    ``decomposed``: a pre-norm block whose LayerNorms and GELU are written out in elementwise operators
    (ReduceMean, Sub, Pow, ..., Div, Erf, Add, Mul), as older exporters emit them: the graph a runtime's
    optimiser fuses back into one LayerNormalization or Gelu node, and runs one operator at a time
    when its optimisations are off."""
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
    constants = (("two", 2.0), ("eps", 1e-5), ("sqrt2", np.sqrt(2.0)), ("f_one", 1.0), ("half", 0.5))
    for name, value in constants if decomposed else ():
        weights.append(numpy_helper.from_array(np.array([value], np.float32), name))

    hidden = node("Gather", ["embedding", "ids"], "embedded")
    length = node("Shape", ["ids"], "ids_shape", start=1, end=2)
    positions = node("Slice", ["position", "zero", length], "positions")
    hidden = node("Add", [hidden, positions], "h0")

    def layer_norm(x: str, p: str) -> str:
        gamma = numpy_helper.from_array(np.ones(WIDTH, np.float32), p + "gamma")
        beta = numpy_helper.from_array(np.zeros(WIDTH, np.float32), p + "beta")
        weights.extend((gamma, beta))
        mean = node("ReduceMean", [x], p + "mean", axes=[-1])
        centred = node("Sub", [x, mean], p + "centred")
        var = node("ReduceMean", [node("Pow", [centred, "two"], p + "sq")], p + "var", axes=[-1])
        std = node("Sqrt", [node("Add", [var, "eps"], p + "var_eps")], p + "std")
        normed = node("Div", [centred, std], p + "normed")
        return node("Add", [node("Mul", [normed, p + "gamma"], p + "scaled"), p + "beta"], p + "ln")

    def gelu(x: str, p: str) -> str:
        erf = node("Erf", [node("Div", [x, "sqrt2"], p + "scaled_x")], p + "erf")
        with_x = node("Mul", [x, node("Add", [erf, "f_one"], p + "erf1")], p + "xerf")
        return node("Mul", [with_x, "half"], p + "gelu")

    for layer in range(LAYERS):
        p = f"l{layer}_"
        normed = layer_norm(hidden, p + "ln1_") if decomposed else hidden
        q = node("MatMul", [normed, weight(p + "wq", WIDTH, WIDTH)], p + "q")
        k = node("MatMul", [normed, weight(p + "wk", WIDTH, WIDTH)], p + "k")
        v = node("MatMul", [normed, weight(p + "wv", WIDTH, WIDTH)], p + "v")
        kt = node("Transpose", [k], p + "kt", perm=[0, 2, 1])
        scores = node("Mul", [node("MatMul", [q, kt], p + "qk"), "attn_scale"], p + "scores")
        attended = node("MatMul", [node("Softmax", [scores], p + "probs", axis=-1), v], p + "attended")
        projected = node("MatMul", [attended, weight(p + "wo", WIDTH, WIDTH)], p + "projected")
        hidden = node("Add", [hidden, projected], p + "h_attn")
        normed = layer_norm(hidden, p + "ln2_") if decomposed else hidden
        up_in = node("MatMul", [normed, weight(p + "w1", WIDTH, 4 * WIDTH)], p + "up")
        up = gelu(up_in, p) if decomposed else node("Relu", [up_in], p + "act")
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
    """An onnxruntime session over the graph, by default on one thread: its cost is one core's, measurable.

    ``optimizations``: onnxruntime's graph optimisations, "all" (its default) or "off"
    (``ORT_DISABLE_ALL``: every node runs as written). ``profile_to``: where to write an onnxruntime
    profile of a few forwards of the same graph with the same options, made at start-up on a twin
    session (onnxruntime profiles a session from its creation, and the serving one stays unprofiled).
    ``intra_op_threads``: the size of the session's own thread pool (onnxruntime's default spins its
    threads between parallel sections). ``cleanup``: "per-request" tidies memory after every forward
    as the pseudo-optimisation does (the arena shrunk at the end of the run, a full garbage collection,
    the C heap trimmed back to the OS), "on-demand" only when :meth:`release_memory` asks, "off" never.
    """

    def __init__(
        self,
        seed: int = 0,
        device: str = "cpu",
        decomposed: bool = False,
        optimizations: str = "all",
        profile_to: Path | None = None,
        intra_op_threads: int = 1,
        cleanup: str = "off",
    ) -> None:
        graph = build_graph(seed, decomposed).SerializeToString()
        providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if device == "cuda" else None
        options = _options(optimizations, intra_op_threads)
        if cleanup != "off":
            _shrinkable_arena()
            options.add_session_config_entry("session.use_env_allocators", "1")
        self._session = ort.InferenceSession(graph, options, providers=providers or ["CPUExecutionProvider"])
        self._cleanup, self._release_next = cleanup, False
        self._shrink = ort.RunOptions()
        self._shrink.add_run_config_entry(
            "memory.enable_memory_arena_shrinkage", "gpu:0" if device == "cuda" else "cpu:0"
        )
        if profile_to is not None:
            _write_profile(graph, _options(optimizations, intra_op_threads), providers, profile_to)

    def forward(self, batch: list[list[int]]) -> np.ndarray:
        """Logits [len(batch), VOCAB] of each sequence's last position; shorter ones are left-padded."""
        width = max(1, max(len(ids) for ids in batch))
        padded = np.zeros((len(batch), width), dtype=np.int64)
        for row, ids in enumerate(batch):
            if ids:
                padded[row, width - len(ids) :] = ids
        tidy = self._cleanup == "per-request" or self._release_next
        self._release_next = False
        logits = self._session.run(["logits"], {"ids": padded}, self._shrink if tidy else None)[0][:, 0, :]
        if tidy:
            gc.collect()
            _malloc_trim()
        return logits

    def release_memory(self) -> None:
        """Hand the arena's and the heap's free memory back after the next forward (once)."""
        self._release_next = True


@functools.cache
def _shrinkable_arena() -> None:
    """One CPU arena for the process's sessions that grows by what each allocation asks
    (``kSameAsRequested``), the only kind onnxruntime can shrink at the end of a run."""
    memory = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT)
    ort.create_and_register_allocator(memory, ort.OrtArenaCfg(0, 1, -1, -1))


def _malloc_trim() -> None:
    trim = _libc_malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _libc_malloc_trim():
    """glibc's malloc_trim, looked up once (not every forward); None where the C library has none."""
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


def _options(optimizations: str, intra_op_threads: int = 1) -> ort.SessionOptions:
    options = ort.SessionOptions()
    options.intra_op_num_threads = intra_op_threads
    options.inter_op_num_threads = 1
    if optimizations == "off":
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return options


_PROFILED_FORWARDS = 20
_PROFILED_SHAPE = (2, 96)  # two prompts of the service's usual length


def _write_profile(
    graph: bytes, options: ort.SessionOptions, providers: list[str] | None, path: Path
) -> None:
    options.enable_profiling = True
    options.profile_file_prefix = str(path.with_suffix(""))
    twin = ort.InferenceSession(graph, options, providers=providers or ["CPUExecutionProvider"])
    ids = np.random.default_rng(0).integers(0, VOCAB, size=_PROFILED_SHAPE)
    for _ in range(_PROFILED_FORWARDS):
        twin.run(["logits"], {"ids": ids})
    Path(twin.end_profiling()).replace(path)
