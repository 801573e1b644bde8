"""Graph clean-ups (oxport.passes.optimize) and dead-code removal: what each pass removes, and
that ONNX Runtime computes the same as before (IR graphs) or as eager PyTorch (models),
at the example size and at a second size of every dynamic axis."""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Callable

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto
from torch import nn

import oxport
from oxport import serialize
from oxport.passes import optimize
from oxport.passes import folding as passes
from oxport.ir import Graph, Type, Value

TOL = {"rtol": 1e-3, "atol": 1e-5}


# -- helpers --------------------------------------------------------------------------
def _session(data: bytes) -> ort.InferenceSession:
    return ort.InferenceSession(data, providers=["CPUExecutionProvider"])


def _ir_run(graph: Graph, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    data = serialize.to_bytes(serialize.serialize(graph))
    onnx.checker.check_model(onnx.load_from_string(data), full_check=True)
    return _session(data).run(None, feeds)


def _same_after(build: Callable[[], Graph], apply: Callable[[Graph], object],
                feeds: dict[str, np.ndarray]) -> Graph:
    """Build the graph twice; ``apply`` the pass to the second; ORT results must agree."""
    expected = _ir_run(build(), feeds)
    graph = build()
    apply(graph)
    for got, want in zip(_ir_run(graph, feeds), expected, strict=True):
        np.testing.assert_allclose(got, want, **TOL)
    return graph


def _ops(graph: Graph) -> list[str]:
    return [n.op_type for n in graph.nodes]


def _ints(graph: Graph, values: list[int]) -> Value:
    return graph.add_initializer(graph.fresh_name("c"), torch.tensor(values, dtype=torch.int64))


def _root(opset: int = 17) -> Graph:
    graph = Graph()
    graph.use_domain("", opset)
    return graph


def _node(graph: Graph, op: str, inputs: list, type_: Type, **attrs) -> Value:
    out = graph.add_node("", op, inputs, 1, {k: v for k, v in attrs.items()}).outputs()[0]
    return out.setType(type_)


def _export(model: nn.Module, args: tuple, **kwargs) -> bytes:
    f = io.BytesIO()
    oxport.export(model, args, f, **kwargs)
    return f.getvalue()


def _check(data: bytes, model: nn.Module, *inputs: torch.Tensor) -> None:
    session = _session(data)
    feeds = {i.name: x.numpy() for i, x in zip(session.get_inputs(), inputs)}
    with torch.no_grad():
        expected = model(*inputs)
    expected = [expected] if isinstance(expected, torch.Tensor) else list(expected)
    for got, want in zip(session.run(None, feeds), expected, strict=True):
        np.testing.assert_allclose(got, want.numpy(), **TOL)


def _op_counts(data: bytes) -> Counter:
    return Counter(n.op_type for n in onnx.load_from_string(data).graph.node)


F32 = torch.float32


# -- dead code ------------------------------------------------------------------------
def test_a_dead_chain_goes_entirely():
    graph = _root()
    x = graph.add_input("x", Type.tensor(F32, (2, 3)))
    a = _node(graph, "Relu", [x], Type.tensor(F32, (2, 3)))
    b = _node(graph, "Neg", [a], Type.tensor(F32, (2, 3)))
    _node(graph, "Exp", [b], Type.tensor(F32, (2, 3)))  # a -> b -> exp: nothing uses it
    graph.outputs = [_node(graph, "Sigmoid", [x], Type.tensor(F32, (2, 3)))]
    assert passes.eliminate_dead_code(graph) == 3
    assert _ops(graph) == ["Sigmoid"]


def _if_graph(dead_inside: bool) -> Graph:
    """An If whose then-branch reads an outer value (kept) and may hold a dead chain."""
    graph = _root()
    x = graph.add_input("x", Type.tensor(F32, (3,)))
    cond = graph.add_input("c", Type.tensor(torch.bool, ()))
    outer = _node(graph, "Relu", [x], Type.tensor(F32, (3,)))
    _node(graph, "Neg", [_node(graph, "Abs", [x], Type.tensor(F32, (3,)))],
          Type.tensor(F32, (3,)))  # dead at the top level
    then, other = Graph("then", parent=graph), Graph("else", parent=graph)
    then.outputs = [_node(then, "Exp", [outer], Type.tensor(F32, (3,)))]
    if dead_inside:
        _node(then, "Cos", [_node(then, "Sin", [outer], Type.tensor(F32, (3,)))],
              Type.tensor(F32, (3,)))
    other.outputs = [_node(other, "Identity", [x], Type.tensor(F32, (3,)))]
    graph.outputs = [_node(graph, "If", [cond], Type.tensor(F32, (3,)),
                           then_branch=("g", then), else_branch=("g", other))]
    return graph


def test_dead_chains_go_in_subgraphs_too_and_outer_values_they_use_stay():
    feeds = {"x": np.array([-1.0, 0.5, 2.0], np.float32), "c": np.array(True)}
    graph = _same_after(lambda: _if_graph(True), passes.eliminate_dead_code, feeds)
    assert _ops(graph) == ["Relu", "If"]  # Abs -> Neg went, Relu (used inside) stayed
    assert _ops(graph.nodes[1].attrs["then_branch"][1]) == ["Exp"]


# -- the numpy folding fast path for comparisons, logic and ConstantOfShape ------------
I64 = np.array([[3, -1, 0], [7, 3, -2]], np.int64)
BOOLS = np.array([[True, False, True], [False, False, True]])
FAST_CASES = [
    ("Equal", [I64, np.array([3, 3, 0], np.int64)], {}),
    ("Less", [I64, np.array(1, np.int64)], {}),
    ("Greater", [I64.astype(np.float32), np.float32([[0.5], [3.0]])], {}),
    ("LessOrEqual", [I64, I64[:1]], {}),
    ("GreaterOrEqual", [I64, np.array(3, np.int64)], {}),
    ("Not", [BOOLS], {}),
    ("And", [BOOLS, BOOLS[:1]], {}),
    ("Or", [BOOLS, np.array(False)], {}),
    ("Xor", [BOOLS, BOOLS[::-1]], {}),
    ("ConstantOfShape", [np.array([2, 3], np.int64)], {}),
    ("ConstantOfShape", [np.array([4], np.int64)], {"value": ("t", torch.tensor([7], dtype=torch.int64))}),
    ("ConstantOfShape", [np.array([0, 2], np.int64)], {"value": ("t", torch.tensor([1.5]))}),
]


def _one_node(op: str, arrays: list, attrs: dict) -> Graph:
    graph = _root()
    inputs = [graph.add_initializer(f"c{i}", torch.from_numpy(np.array(a)))
              for i, a in enumerate(arrays)]
    graph.outputs = graph.add_node("", op, inputs, 1, attrs).outputs()
    return graph


@pytest.mark.parametrize("op, arrays, attrs", FAST_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(FAST_CASES)])
def test_numpy_folding_matches_onnx_reference(op, arrays, attrs, monkeypatch):
    (expected,) = passes._fold_reference(_one_node(op, arrays, attrs).nodes[0], 17)
    monkeypatch.setattr(passes, "_fold_reference", lambda node, opset: pytest.fail(
        f"{node.op_type} went to onnx.reference"))
    graph = _one_node(op, arrays, attrs)
    assert passes.fold_constants(graph, 17) == 1
    got = graph.outputs[0].const.numpy()
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


# -- chains, Identity, common subexpressions ------------------------------------------
def test_transpose_pairs_compose_and_cancel():
    def build(perms: list[list[int]]) -> Callable[[], Graph]:
        def make() -> Graph:
            graph = _root()
            value = graph.add_input("x", Type.tensor(F32, (2, 3, 4)))
            shape = np.empty((2, 3, 4))
            for perm in perms:
                shape = shape.transpose(perm)
                value = _node(graph, "Transpose", [value], Type.tensor(F32, shape.shape),
                              perm=("is", perm))
            graph.outputs = [value]
            return graph
        return make

    feeds = {"x": np.arange(24, dtype=np.float32).reshape(2, 3, 4)}
    apply = lambda g: (optimize.collapse_chains(g, 17), passes.eliminate_dead_code(g))  # noqa: E731
    composed = _same_after(build([[1, 0, 2], [0, 2, 1]]), apply, feeds)
    assert _ops(composed) == ["Transpose"]
    assert composed.nodes[0].attrs["perm"] == ("is", [1, 2, 0])
    cancelled = _same_after(build([[2, 0, 1], [1, 2, 0]]), apply, feeds)
    assert _ops(cancelled) == ["Identity"]  # the output needs a node of its own


@pytest.mark.parametrize("dtypes, kept", [
    ((torch.int32, torch.int64, F32), 1),    # a lossless middle cast goes
    ((F32, torch.int64, F32), 2),            # float -> int -> float rounds: both stay
    ((F32, torch.float64, F32), 0),          # back to the input's type: no cast at all
])
def test_cast_chains(dtypes, kept):
    source, middle, target = dtypes

    def build() -> Graph:
        graph = _root()
        x = graph.add_input("x", Type.tensor(source, (4,)))
        onnx_type = {torch.int64: TensorProto.INT64, F32: TensorProto.FLOAT,
                     torch.float64: TensorProto.DOUBLE}
        a = _node(graph, "Cast", [x], Type.tensor(middle, (4,)), to=("i", onnx_type[middle]))
        b = _node(graph, "Cast", [a], Type.tensor(target, (4,)), to=("i", onnx_type[target]))
        graph.outputs = [_node(graph, "Neg", [b], Type.tensor(target, (4,)))]
        return graph

    values = np.array([1.7, -2.5, 3.0, 4.4]).astype(torch.empty(0, dtype=source).numpy().dtype)
    graph = _same_after(build, lambda g: (optimize.collapse_chains(g, 17),
                                          passes.eliminate_dead_code(g)), {"x": values})
    assert Counter(_ops(graph))["Cast"] == kept


def test_reshape_squeeze_and_unsqueeze_chains():
    def build() -> Graph:
        graph = _root(13)
        x = graph.add_input("x", Type.tensor(F32, (2, 6)))
        r = _node(graph, "Reshape", [x, _ints(graph, [3, 4])], Type.tensor(F32, (3, 4)))
        r = _node(graph, "Reshape", [r, _ints(graph, [4, 3])], Type.tensor(F32, (4, 3)))
        u = _node(graph, "Unsqueeze", [r, _ints(graph, [0])], Type.tensor(F32, (1, 4, 3)))
        u = _node(graph, "Unsqueeze", [u, _ints(graph, [-1, 2])], Type.tensor(F32, (1, 4, 1, 3, 1)))
        s = _node(graph, "Squeeze", [_node(graph, "Unsqueeze", [x, _ints(graph, [1])],
                                           Type.tensor(F32, (2, 1, 6))), _ints(graph, [1])],
                  Type.tensor(F32, (2, 6)))
        graph.outputs = [u, _node(graph, "Neg", [s], Type.tensor(F32, (2, 6)))]
        return graph

    feeds = {"x": np.arange(12, dtype=np.float32).reshape(2, 6)}
    graph = _same_after(build, lambda g: (optimize.collapse_chains(g, 13),
                                          passes.eliminate_dead_code(g)), feeds)
    assert Counter(_ops(graph)) == Counter({"Reshape": 1, "Unsqueeze": 1, "Neg": 1})
    unsqueeze = graph.nodes[_ops(graph).index("Unsqueeze")]
    assert unsqueeze.inputs()[1].const.tolist() == [0, 2, 4]


def test_scalar_reshapes_become_squeeze_and_unsqueeze_pairs_that_cancel():
    def build() -> Graph:
        graph = _root(13)
        x = graph.add_input("x", Type.tensor(torch.int64, (1,)))
        scalar = _node(graph, "Reshape", [x, _ints(graph, [])], Type.tensor(torch.int64, ()))
        back = _node(graph, "Reshape", [scalar, _ints(graph, [1])], Type.tensor(torch.int64, (1,)))
        graph.outputs = [_node(graph, "Neg", [back], Type.tensor(torch.int64, (1,)))]
        return graph

    graph = _same_after(build, lambda g: (optimize.collapse_chains(g, 13),
                                          passes.eliminate_dead_code(g)),
                        {"x": np.array([5], np.int64)})
    assert _ops(graph) == ["Neg"]


def test_identities_are_bypassed_and_repeats_shared():
    def build() -> Graph:
        graph = _root()
        x = graph.add_input("x", Type.tensor(F32, (3,)))
        i = _node(graph, "Identity", [x], Type.tensor(F32, (3,)))
        a = _node(graph, "Exp", [i], Type.tensor(F32, (3,)))
        b = _node(graph, "Exp", [x], Type.tensor(F32, (3,)))  # the same as a once i goes
        graph.outputs = [_node(graph, "Add", [a, b], Type.tensor(F32, (3,))),
                         _node(graph, "Identity", [a], Type.tensor(F32, (3,)))]
        return graph

    def apply(graph: Graph) -> None:
        assert optimize.remove_identities(graph) == 2
        assert optimize.eliminate_common_subexpressions(graph) == 1

    graph = _same_after(build, apply, {"x": np.array([0.0, 1.0, -1.0], np.float32)})
    assert _ops(graph) == ["Exp", "Add"]
    assert graph.outputs[1] is graph.nodes[0].outputs()[0]


def test_random_ops_are_never_shared():
    graph = _root()
    first = _node(graph, "RandomNormal", [], Type.tensor(F32, (2,)), shape=("is", [2]))
    second = _node(graph, "RandomNormal", [], Type.tensor(F32, (2,)), shape=("is", [2]))
    graph.outputs = [first, second]
    assert optimize.eliminate_common_subexpressions(graph) == 0


# -- static shape arithmetic -----------------------------------------------------------
class Heads(nn.Module):
    """Attention-style reshapes: split into heads, move them, merge them back."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq = x.size(0), x.size(1)
        h = self.proj(x).view(batch, seq, 4, x.size(-1) // 4).transpose(1, 2)
        h = torch.softmax(h, dim=-1).transpose(1, 2)
        return h.reshape(x.size(0), x.size(1), -1) + torch.arange(x.size(1)).unsqueeze(-1)


def test_static_shapes_fold_completely_without_dynamic_axes():
    model, x = Heads().eval(), torch.randn(2, 5, 16)
    data = _export(model, (x,))
    counts = _op_counts(data)
    assert not {"Shape", "Gather", "Slice", "Concat", "Squeeze"} & set(counts), counts
    _check(data, model, x)


def test_only_dynamic_dims_stay_computed_and_shape_reads_are_shared():
    model, x = Heads().eval(), torch.randn(2, 5, 16)
    axes = {"x": {0: "batch", 1: "seq"}}
    data = _export(model, (x,), input_names=["x"], dynamic_axes=axes)
    plain = _export(model, (x,), input_names=["x"], dynamic_axes=axes, do_constant_folding=False)
    counts, before = _op_counts(data), _op_counts(plain)
    assert counts["Shape"] <= 1 < before["Shape"], (counts, before)
    assert sum(counts.values()) < sum(before.values()) // 2
    for size in [(2, 5, 16), (3, 9, 16), (1, 1, 16)]:
        _check(data, model, torch.randn(*size))


class Rows(nn.Module):
    """A data-dependent size (NonZero) must never become a constant."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        picked = torch.nonzero(x > 0)
        return picked.view(picked.size(0), -1).sum(0) + picked.size(0)


def test_data_dependent_sizes_are_not_folded():
    model = Rows()
    data = _export(model, (torch.tensor([1.0, -1.0, 2.0, 3.0]),))
    assert "Shape" in _op_counts(data)
    for values in ([1.0, -1.0, 2.0, 3.0], [-1.0, -1.0, 2.0, -3.0]):
        _check(data, model, torch.tensor(values))


def test_reshape_targets_use_copy_and_infer_for_run_time_dims():
    class Flat(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.view(x.size(0), x.size(1) * 3, 2).exp()

    model, x = Flat(), torch.randn(3, 4, 6)
    data = _export(model, (x,), input_names=["x"], dynamic_axes={"x": [0, 1]})
    proto = onnx.load_from_string(data)
    reshape = next(n for n in proto.graph.node if n.op_type == "Reshape")
    target = next(t for t in proto.graph.initializer if t.name == reshape.input[1])
    assert onnx.numpy_helper.to_array(target).tolist() == [0, -1, 2]
    for size in [(3, 4, 6), (2, 7, 6)]:
        _check(data, model, torch.randn(*size))


def test_a_failing_shape_inference_leaves_the_graph_as_it_was(monkeypatch):
    def fail(*args, **kwargs):
        raise onnx.shape_inference.InferenceError("cannot infer")

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", fail)
    model, x = Heads().eval(), torch.randn(2, 5, 16)
    data = _export(model, (x,), input_names=["x"], dynamic_axes={"x": {0: "b", 1: "s"}})
    # the run-time sizes' arithmetic stays (x.size(-1) // 4 is static: folded at the trace)
    assert {"Shape", "Concat"} <= set(_op_counts(data))
    _check(data, model, torch.randn(3, 7, 16))


# -- weights ----------------------------------------------------------------------------
class TiedLM(nn.Module):
    """An embedding whose table is also the output layer (GPT-2 style)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(300, 32)
        self.head = nn.Linear(32, 300, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.embed(ids)))


def test_a_tied_weight_is_stored_once_not_transposed_beside_itself():
    model, ids = TiedLM().eval(), torch.randint(0, 300, (2, 7))
    data = _export(model, (ids,), input_names=["ids"], dynamic_axes={"ids": [0, 1]})
    weights = 300 * 32 * 4
    assert weights <= len(data) < weights * 1.05
    for size in [(2, 7), (4, 3)]:
        _check(data, model, torch.randint(0, 300, size))


def test_a_folded_transpose_shares_the_weight_memory():
    model = nn.Sequential(nn.Linear(8, 4, bias=False)).eval()
    result = oxport.convert(model, (torch.randn(2, 3, 8),))
    (weight,) = result.serialized.weights
    assert list(weight.tensor.shape) == [8, 4]
    assert weight.tensor.untyped_storage().data_ptr() == \
        model[0].weight.untyped_storage().data_ptr()
    data = result.to_bytes()
    _check(data, model, torch.randn(2, 3, 8))


# -- Conv + BatchNormalization ----------------------------------------------------------
def _randomize_statistics(*norms: nn.BatchNorm2d) -> None:
    """Statistics and affine parameters a fold has to get right (not the 0/1 defaults)."""
    with torch.no_grad():
        for norm in norms:
            norm.running_mean.uniform_(-1, 1)
            norm.running_var.uniform_(0.5, 2)
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-1, 1)


class ConvNorm(nn.Module):
    def __init__(self, bias: bool = False) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=bias)
        self.bn = nn.BatchNorm2d(8)
        self.grouped = nn.Conv2d(8, 8, 3, groups=4)
        self.bn2 = nn.BatchNorm2d(8)
        _randomize_statistics(self.bn, self.bn2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn2(self.grouped(torch.relu(self.bn(self.conv(x)))))


@pytest.mark.parametrize("bias", [False, True])
def test_batch_norms_fold_into_convolutions_lazily(bias):
    model, x = ConvNorm(bias).eval(), torch.randn(2, 3, 10, 10)
    result = oxport.convert(model, (x,), input_names=["x"], dynamic_axes={"x": {0: "n"}})
    assert [n.op_type for n in result.graph.nodes] == ["Conv", "Relu", "Conv"]
    weights = {w.name: w.tensor for w in result.serialized.weights}
    assert sorted(weights) == sorted(["conv.weight", "conv.bias" if bias else "bn.bias",
                                      "grouped.weight", "grouped.bias"])
    assert isinstance(weights["conv.weight"], serialize.LazyTensor)  # computed when written
    data = result.to_bytes()
    for size in (2, 5):
        _check(data, model, torch.randn(size, 3, 10, 10))


class TransposedNorm(nn.Module):
    """DCGAN's blocks: ConvTranspose then BatchNorm (and a grouped one, left alone)."""

    def __init__(self) -> None:
        super().__init__()
        self.up = nn.ConvTranspose2d(6, 4, 4, 2, 1, bias=False)
        self.bn = nn.BatchNorm2d(4)
        self.grouped = nn.ConvTranspose2d(4, 4, 3, groups=2)
        self.bn2 = nn.BatchNorm2d(4)
        _randomize_statistics(self.bn, self.bn2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn2(self.grouped(torch.relu(self.bn(self.up(x)))))


@pytest.mark.parametrize("dynamo", [False, True])
def test_batch_norms_fold_into_an_ungrouped_conv_transpose(dynamo):
    model, x = TransposedNorm().eval(), torch.randn(2, 6, 5, 5)
    result = oxport.convert(model, (x,), dynamo=dynamo)
    assert _ops(result.graph) == ["ConvTranspose", "Relu", "ConvTranspose",
                                  "BatchNormalization"]
    weights = {w.name: w.tensor for w in result.serialized.weights}
    assert isinstance(weights["up.weight"], serialize.LazyTensor)
    _check(result.to_bytes(), model, x)


def test_batch_norms_stay_in_training_exports_and_for_run_time_weights():
    model, x = ConvNorm(), torch.randn(2, 3, 10, 10)
    kept = oxport.convert(model.eval(), (x,), export_params=False).graph
    assert Counter(_ops(kept))["BatchNormalization"] == 2
    trained = oxport.convert(model, (x,), training=oxport.TrainingMode.TRAINING).graph
    assert "ReduceMean" in _ops(trained)  # batch statistics, not folded running ones


def test_a_convolution_whose_output_is_also_used_keeps_its_batch_norm():
    class Both(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 1)
            self.bn = nn.BatchNorm2d(4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.conv(x)
            return self.bn(y) + y

    model, x = Both().eval(), torch.randn(1, 3, 4, 4)
    result = oxport.convert(model, (x,))
    assert "BatchNormalization" in _ops(result.graph)
    _check(result.to_bytes(), model, x)


# -- a transformer ----------------------------------------------------------------------
def test_a_small_gpt2_keeps_few_shape_nodes_and_runs_at_a_second_size():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100,
                                     n_positions=64, use_cache=False)
    lm = transformers.GPT2LMHeadModel(config).eval()

    class Logits(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lm = lm

        def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return self.lm(ids, attention_mask=mask).logits

    model = Logits().eval()
    axes = {"ids": {0: "batch", 1: "seq"}, "mask": {0: "batch", 1: "seq"}}
    ids, mask = torch.randint(0, 100, (2, 8)), torch.ones(2, 8, dtype=torch.int64)
    data = _export(model, (ids, mask), input_names=["ids", "mask"], dynamic_axes=axes)
    plain = _export(model, (ids, mask), input_names=["ids", "mask"], dynamic_axes=axes,
                    do_constant_folding=False)
    counts = _op_counts(data)
    assert counts["Shape"] <= 4 and sum(counts.values()) < sum(_op_counts(plain).values()) / 2
    for batch, seq in [(2, 8), (3, 5), (1, 11)]:
        ids = torch.randint(0, 100, (batch, seq))
        mask = torch.ones(batch, seq, dtype=torch.int64)
        _check(data, model, ids, mask)


# -- neutral arithmetic and constants ---------------------------------------------------
class _Neutral(nn.Module):
    def forward(self, x: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
        n = ids.shape[1] + 0                      # an integer + 0: gone
        positions = torch.arange(n) * 1           # * 1: gone
        return x + 0.0, x * torch.ones(1, 1, 1), positions + ids


def test_neutral_arithmetic_goes_where_it_changes_nothing():
    model, x, ids = _Neutral(), torch.randn(2, 3), torch.randint(0, 9, (2, 4))
    data = _export(model, (x, ids), input_names=["x", "ids"],
                   dynamic_axes={"x": [0], "ids": [0, 1]})
    ops = Counter(n.op_type for n in onnx.load_from_string(data).graph.node)
    # Kept: a float + 0.0 (-0.0 + 0.0 is +0.0) and a * 1 that broadcasts x to rank 3.
    assert ops["Add"] == 2 and ops["Mul"] == 1, ops
    session = _session(data)
    for size in [(2, 3, 2, 4), (5, 3, 3, 7)]:
        x, ids = torch.randn(*size[:2]), torch.randint(0, 9, size[2:])
        got = session.run(None, {"x": x.numpy(), "ids": ids.numpy()})
        for ours, theirs in zip(got, model(x, ids)):
            np.testing.assert_allclose(ours, theirs.numpy(), rtol=1e-6, atol=0)


def test_constant_nodes_become_initializers_unless_initializers_are_inputs():
    model, x = nn.Sequential(nn.Linear(4, 4), nn.Softplus(beta=2.0)), torch.randn(2, 4)
    folded = onnx.load_from_string(_export(model, (x,)))
    assert not [n for n in folded.graph.node if n.op_type == "Constant"]
    as_inputs = onnx.load_from_string(_export(model, (x,), keep_initializers_as_inputs=True))
    initializers = {t.name for t in as_inputs.graph.initializer}
    assert initializers <= {i.name for i in as_inputs.graph.input}
    _check(_export(model, (x,)), model, x)
