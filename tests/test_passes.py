"""Core passes: the numpy constant-folding fast path agrees with onnx.reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from onnx import TensorProto

from oxport.passes import folding as passes
from oxport.ir import Graph, Type

F32 = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7.5
I64 = np.array([[7, -7, 9], [-9, 5, 0]], dtype=np.int64)

# (op, inputs (numpy arrays or None), attributes, opset)
CASES = [
    ("Shape", [F32], {}, 13),
    ("Shape", [F32], {"start": ("i", 1), "end": ("i", -1)}, 15),
    ("Gather", [F32, np.array([2, -1], np.int64)], {"axis": ("i", 2)}, 13),
    ("Gather", [F32, np.array(1, np.int64)], {}, 13),
    ("Unsqueeze", [F32, np.array([0, -1], np.int64)], {}, 13),
    ("Unsqueeze", [F32], {"axes": ("is", [1])}, 11),
    ("Squeeze", [F32[:1], np.array([0], np.int64)], {}, 13),
    ("Squeeze", [F32[:, :1]], {"axes": ("is", [1])}, 11),
    ("Squeeze", [F32[:1, :1]], {}, 13),
    ("Concat", [I64, I64[:1]], {"axis": ("i", 0)}, 13),
    ("Cast", [F32], {"to": ("i", TensorProto.INT64)}, 13),
    ("Cast", [I64], {"to": ("i", TensorProto.FLOAT)}, 13),
    ("Cast", [I64], {"to": ("i", TensorProto.BOOL)}, 13),
    ("Slice", [F32, np.array([1, -3], np.int64), np.array([2**62, -1], np.int64),
               np.array([1, 2], np.int64)], {}, 13),
    ("Slice", [F32, np.array([-1], np.int64), np.array([-2**62], np.int64),
               np.array([2], np.int64), np.array([-2], np.int64)], {}, 13),
    ("Slice", [F32], {"starts": ("is", [0, 1]), "ends": ("is", [1, 100])}, 9),
    ("Reshape", [F32, np.array([0, -1], np.int64)], {}, 13),
    ("Reshape", [F32, np.array([4, 0, -1], np.int64)], {}, 13),
    ("Transpose", [F32], {"perm": ("is", [2, 0, 1])}, 13),
    ("Transpose", [F32], {}, 13),
    ("Add", [F32, np.float32(2.0) * np.ones((4,), np.float32)], {}, 13),
    ("Sub", [I64, np.array(3, np.int64)], {}, 13),
    ("Mul", [F32, F32[:1]], {}, 13),
    ("Div", [F32, np.array(3.0, np.float32)], {}, 13),
    ("Div", [I64, np.array([2, -2, 4], np.int64)], {}, 13),
    ("Identity", [I64], {}, 13),
    ("Expand", [I64[:, :1], np.array([3, 2, 4], np.int64)], {}, 13),
    ("Expand", [F32, np.array([1, 1], np.int64)], {}, 13),
]


def _graph(op: str, arrays: list, attrs: dict) -> Graph:
    graph = Graph()
    inputs = [None if a is None else graph.add_initializer(f"c{i}", torch.from_numpy(
        np.array(a))) for i, a in enumerate(arrays)]
    node = graph.add_node("", op, inputs, 1, attrs)
    graph.outputs = node.outputs()
    return graph


@pytest.mark.parametrize("op, arrays, attrs, opset", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_numpy_fast_path_matches_onnx_reference(op, arrays, attrs, opset, monkeypatch):
    expected = passes._fold_reference(_graph(op, arrays, attrs).nodes[0], opset)
    assert expected is not None
    monkeypatch.setattr(passes, "_fold_reference", lambda node, opset: pytest.fail(
        f"{node.op_type} went to onnx.reference"))
    graph = _graph(op, arrays, attrs)
    assert passes.fold_constants(graph, opset) == 1
    assert graph.nodes == []
    got = graph.outputs[0].const.numpy()
    assert got.dtype == expected[0].dtype and got.shape == expected[0].shape
    np.testing.assert_array_equal(got, expected[0])


def test_other_ops_use_the_reference_only_for_small_inputs():
    small = _graph("Cos", [np.ones((3,), np.float32)], {})
    assert passes.fold_constants(small, 13) == 1
    np.testing.assert_allclose(small.outputs[0].const.numpy(), np.cos(np.ones(3)), rtol=1e-6)
    big = _graph("Cos", [np.ones((passes.REFERENCE_MAX_ELEMENTS + 1,), np.float32)], {})
    assert passes.fold_constants(big, 13) == 0
    assert [n.op_type for n in big.nodes] == ["Cos"]


def test_frozen_values_and_inputs_are_not_folded():
    graph = _graph("Transpose", [F32], {})
    assert passes.fold_constants(graph, 13, frozen={id(graph.nodes[0].inputs()[0])}) == 0
    graph = Graph()
    x = graph.add_input("x", Type.tensor(torch.float32, (2,)))
    graph.outputs = graph.add_node("", "Neg", [x]).outputs()
    assert passes.fold_constants(graph, 13) == 0


def test_a_repeated_fold_is_shared():
    graph = Graph()
    weight = graph.add_initializer("w", torch.randn(3, 4), parameter=True)
    first = graph.add_node("", "Transpose", [weight], 1, {"perm": ("is", [1, 0])})
    second = graph.add_node("", "Transpose", [weight], 1, {"perm": ("is", [1, 0])})
    x = graph.add_input("x", Type.tensor(torch.float32, (2, 4)))
    use = graph.add_node("", "MatMul", [x, second.outputs()[0]])
    graph.outputs = [first.outputs()[0], use.outputs()[0]]
    assert passes.fold_constants(graph, 13) == 2
    assert [n.op_type for n in graph.nodes] == ["MatMul"]
    assert graph.nodes[0].inputs()[1] is graph.outputs[0]
    passes.eliminate_dead_code(graph)
    assert len(graph.initializers) == 1 and not graph.outputs[0].is_parameter


def test_folding_chains_in_one_pass():
    graph = Graph()
    table = graph.add_initializer("t", torch.arange(6.0))
    shaped = graph.add_node("", "Reshape", [table, graph.add_initializer(
        "s", torch.tensor([2, 3]))]).outputs()[0]
    doubled = graph.add_node("", "Mul", [shaped, shaped]).outputs()[0]
    graph.outputs = [graph.add_node("", "Transpose", [doubled]).outputs()[0]]
    assert passes.fold_constants(graph, 13) == 3
    np.testing.assert_array_equal(graph.outputs[0].const.numpy(),
                                  (np.arange(6.0).reshape(2, 3) ** 2).T.astype(np.float32))


class RelativeBuckets(torch.nn.Module):
    """T5's relative position buckets on a static length: log(0) and a cast of -inf fold."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        position = torch.arange(6)
        distance = (position[None, :] - position[:, None]).abs()
        large = 4 + (torch.log(distance.float() / 4) / np.log(8) * 4).to(torch.long)
        large = torch.min(large, torch.full_like(large, 7))
        return x + torch.where(distance < 4, distance, large).float()


def test_folding_non_finite_values_warns_nothing_and_matches_onnx_runtime(recwarn):
    import io

    import onnxruntime as ort

    import oxport

    x = torch.randn(6, 6)
    buffer = io.BytesIO()
    oxport.export(RelativeBuckets(), (x,), buffer)
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)], \
        [str(w.message) for w in recwarn]
    session = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    np.testing.assert_allclose(got, RelativeBuckets()(x).numpy())
