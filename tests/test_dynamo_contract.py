"""``oxport.export(..., dynamo=True)`` keeps torch.onnx's ``dynamo=True`` contract (issue 37):
each test exports with oxport and with ``torch.onnx.export(..., dynamo=True)`` and compares
the signature (dtypes, ranks, dim names where names are the point) and ONNX Runtime's
results, at the export's sizes and at others."""

from __future__ import annotations

import collections
import io
import warnings
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from torch._higher_order_ops.while_loop import while_loop

import oxport

OPSET = 20


def _ours(model: torch.nn.Module, args: tuple[Any, ...], **options: Any) -> onnx.ModelProto:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return oxport.export(model, args, dynamo=True, opset_version=OPSET,
                             **options).model_proto


def _theirs(model: torch.nn.Module, args: tuple[Any, ...], **options: Any) -> onnx.ModelProto:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.onnx.export(model, args, dynamo=True, opset_version=OPSET,
                                 verbose=False, **options).model_proto


def _dims(value: onnx.ValueInfoProto) -> list[int | str | None]:
    return [d.dim_value if d.HasField("dim_value") else d.dim_param or None
            for d in value.type.tensor_type.shape.dim]


def _types(values: Any) -> list[tuple[int, int]]:
    """(elem type, rank) of each value."""
    return [(v.type.tensor_type.elem_type, len(v.type.tensor_type.shape.dim)) for v in values]


def _signature(proto: onnx.ModelProto) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    return _types(proto.graph.input), _types(proto.graph.output)


def _named_dims(values: Any) -> list[list[int | str | None]]:
    return [_dims(v) for v in values]


def _run(proto: onnx.ModelProto, *arrays: Any) -> list[np.ndarray]:
    session = ort.InferenceSession(proto.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    feeds = {i.name: np.asarray(a.numpy() if isinstance(a, torch.Tensor) else a)
             for i, a in zip(session.get_inputs(), arrays)}
    return session.run(None, feeds)


def _assert_same_runs(ours: onnx.ModelProto, theirs: onnx.ModelProto, *arrays: Any) -> None:
    for mine, torch_onnx in zip(_run(ours, *arrays), _run(theirs, *arrays), strict=True):
        assert mine.dtype == torch_onnx.dtype and mine.shape == torch_onnx.shape
        np.testing.assert_allclose(mine, torch_onnx, rtol=1e-5, atol=1e-6)


# -- 1. dimension names as strings ------------------------------------------------------
class _Add(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x + y


class _Independent(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return y * 2 + x.sum()


@pytest.mark.parametrize("model, shapes", [
    (_Add(), ({0: "batch"}, {0: "batch"})),
    (_Add(), {"x": {0: "batch"}, "y": {0: "batch"}}),
    (_Add(), (["batch", None], ["batch", None])),
    (_Independent(), (None, ["n", None])),
    (_Independent(), ({1: "k"}, {0: torch.export.Dim("n"), 1: "m"})),
], ids=["tuple", "dict", "lists", "one-list", "mixed-with-dim"])
def test_string_dim_names_name_the_onnx_dims_as_torch_onnx_does(model, shapes) -> None:
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    ours = _ours(model, (x, y), dynamic_shapes=shapes)
    theirs = _theirs(model, (x, y), dynamic_shapes=shapes)
    assert _signature(ours) == _signature(theirs)
    assert _named_dims(ours.graph.input) == _named_dims(theirs.graph.input)
    assert _named_dims(ours.graph.output) == _named_dims(theirs.graph.output)
    dims = _named_dims(ours.graph.input)
    # a second size for every named axis (the same name: the same size)
    sizes = {name: 5 + i for i, name in enumerate(sorted(
        {d for shape in dims for d in shape if isinstance(d, str)}))}
    x2, y2 = (torch.randn(*[sizes.get(d, d) for d in shape]) for shape in dims)
    _assert_same_runs(ours, theirs, x2, y2)
    np.testing.assert_allclose(_run(ours, x2, y2)[0], model(x2, y2).numpy(), rtol=1e-5,
                               atol=1e-5)


# -- 2. symbolic numbers as outputs -----------------------------------------------------
class _SizePlusOne(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> Any:
        return x.shape[0] + 1


class _SymMax(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> Any:
        return torch.sym_max(x.shape[0], y.shape[0])


class _FloatHalf(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> Any:
        return float(x.shape[0]) / 2


class _Not(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> Any:
        return torch.sym_not(x.shape[0] > 2)


class _Ite(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> Any:
        return torch.sym_ite(x.shape[0] > 3, x.shape[0], x.shape[1])


class _WhileCount(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> Any:
        def cond(i: Any, acc: torch.Tensor) -> Any:
            return i < x.shape[0]

        def body(i: Any, acc: torch.Tensor) -> Any:
            return i + 1, acc + x[i]

        return while_loop(cond, body, (0, torch.zeros(x.shape[1])))


_SYMBOLIC = [
    (_SizePlusOne(), ((3, 4),), ({0: "n"},), [(5, 4)]),
    (_SymMax(), ((3, 4), (5, 4)), ({0: "n"}, {0: "m"}), [(7, 4), (2, 4)]),
    (_FloatHalf(), ((3, 4),), ({0: "n"},), [(7, 4)]),
    (_Not(), ((3, 4),), ({0: "n"},), [(2, 4)]),
    (_Ite(), ((5, 4),), ({0: "n", 1: "k"},), [(2, 6)]),
    (_WhileCount(), ((3, 4),), ({0: "n"},), [(6, 4)]),
]


@pytest.mark.parametrize("model, shapes, dynamic, second", _SYMBOLIC,
                         ids=["size+1", "sym_max", "float/2", "sym_not", "sym_ite", "while"])
def test_symbolic_numbers_are_0d_outputs_as_in_torch_onnx(model, shapes, dynamic, second
                                                          ) -> None:
    args = tuple(torch.randn(*shape) for shape in shapes)
    ours = _ours(model, args, dynamic_shapes=dynamic)
    theirs = _theirs(model, args, dynamic_shapes=dynamic)
    assert _signature(ours) == _signature(theirs)
    for again in (args, tuple(torch.randn(*shape) for shape in second)):
        _assert_same_runs(ours, theirs, *again)
        expected = torch.utils._pytree.tree_leaves(model(*again))
        for got, want in zip(_run(ours, *again), expected, strict=True):
            np.testing.assert_allclose(got, np.asarray(want), rtol=1e-5, atol=1e-5)


class _PythonNot(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> Any:
        return x + 1, not (x.shape[0] > 2)


class _SizeBranch(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] > 2:
            return x * 2
        return x - 1


_BRANCH_WARNING = r"captured the model's code on a branch.*x\.shape\[0\] > 2"


def test_python_not_on_a_size_warns_where_torch_onnx_fails() -> None:
    """Python's ``not`` makes the SymBool a Python bool: torch.export guards the size and
    returns a constant. torch.onnx fails; oxport exports it right at the example's side of
    the guard and warns naming it (torch.sym_not stays symbolic: the test above)."""
    x = torch.randn(3, 4)
    with pytest.warns(UserWarning, match=_BRANCH_WARNING):
        ours = oxport.export(_PythonNot(), (x,), dynamo=True, opset_version=OPSET,
                             dynamic_shapes=({0: "n"},)).model_proto
    assert _types(ours.graph.output) == [(onnx.TensorProto.FLOAT, 2), (onnx.TensorProto.BOOL, 0)]
    with pytest.raises(Exception):  # noqa: B017 - whichever error torch.onnx raises
        _theirs(_PythonNot(), (x,), dynamic_shapes=({0: "n"},))
    for size in (3, 6):
        x = torch.randn(size, 4)
        got, want = _run(ours, x), _PythonNot()(x)
        np.testing.assert_allclose(got[0], want[0].numpy(), rtol=1e-6)
        assert got[1].item() is want[1]


def test_a_branch_on_a_size_warns_where_torch_onnx_is_silently_wrong() -> None:
    """``if x.shape[0] > 2`` narrows the dim to 3.. in the capture: both files take that
    branch at every size (wrong at 2); oxport warns naming the condition, torch.onnx does
    not (docs/differences.md)."""
    x = torch.randn(3, 4)
    with pytest.warns(UserWarning, match=_BRANCH_WARNING):
        ours = oxport.export(_SizeBranch(), (x,), dynamo=True, opset_version=OPSET,
                             dynamic_shapes=({0: "n"},)).model_proto
    theirs = _theirs(_SizeBranch(), (x,), dynamic_shapes=({0: "n"},))
    assert _signature(ours) == _signature(theirs)
    for size in (3, 6):
        x = torch.randn(size, 4)
        _assert_same_runs(ours, theirs, x)
        np.testing.assert_allclose(_run(ours, x)[0], _SizeBranch()(x).numpy(), rtol=1e-6)
    small = torch.randn(2, 4)
    assert not np.allclose(_run(theirs, small)[0], _SizeBranch()(small).numpy())


@pytest.mark.parametrize("fn", [lambda x: x[:5] * 2, lambda x: x[1:-1].sum(0),
                                lambda x: torch.nn.functional.conv1d(x.T[None],
                                                                     torch.ones(2, 4, 3))],
                         ids=["slice", "trim", "conv"])
def test_size_checks_of_ops_do_not_warn(fn) -> None:
    """The bounds an op's own size check sets (a slice, a kernel) are not the model's
    branches: no warning, and the file is right at other sizes."""
    model, x = _Fn(fn), torch.randn(6, 4)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*captured the model's code")
        ours = oxport.export(model, (x,), dynamo=True, opset_version=OPSET,
                             dynamic_shapes=({0: "n"},)).model_proto
    for size in (3, 9):
        x = torch.randn(size, 4)
        np.testing.assert_allclose(_run(ours, x)[0], model(x).numpy(), rtol=1e-5, atol=1e-5)


class _Fn(torch.nn.Module):
    def __init__(self, fn: Any) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: torch.Tensor) -> Any:
        return self.fn(x)


class _WhileRows(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> Any:
        def cond(i: Any, acc: torch.Tensor) -> Any:
            return i < x.shape[0]

        def body(i: Any, acc: torch.Tensor) -> Any:
            return i + 1, acc * 0.5 + x

        return while_loop(cond, body, (0, torch.zeros_like(x)))


class _WhileSizes(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> Any:
        def cond(i: Any, j: Any, acc: torch.Tensor) -> Any:
            return i < 3

        def body(i: Any, j: Any, acc: torch.Tensor) -> Any:
            return i + 1, j + x.shape[0], acc + 1

        return while_loop(cond, body, (0, 0, x.clone()))


@pytest.mark.parametrize("model", [_WhileCount(), _WhileRows(), _WhileSizes()],
                         ids=["count", "rows", "sizes"])
def test_while_loop_outputs_name_their_dims_as_torch_onnx(model) -> None:
    """A while_loop carrying ints: the carried tensors' dims are the dynamic axes' names
    (torch.export proves them), as torch.onnx writes them, not unknown."""
    x, shapes = torch.randn(3, 4), ({0: "n", 1: "k"},)
    ours, theirs = _ours(model, (x,), dynamic_shapes=shapes), \
        _theirs(model, (x,), dynamic_shapes=shapes)
    assert _signature(ours) == _signature(theirs)
    assert _named_dims(ours.graph.output) == _named_dims(theirs.graph.output)
    assert any(isinstance(d, str) for dims in _named_dims(ours.graph.output) for d in dims)
    x = torch.randn(5, 2)
    _assert_same_runs(ours, theirs, x)
    for got, want in zip(_run(ours, x), torch.utils._pytree.tree_leaves(model(x)), strict=True):
        np.testing.assert_allclose(got, np.asarray(want), rtol=1e-5, atol=1e-5)


def test_output_dims_of_size_expressions_use_the_dim_names() -> None:
    """``torch.cat([x, x])`` on a dim named ``n``: the output dim is ``2*n``, as in torch.onnx's
    file (not torch.export's own symbol, ``2*s95``)."""
    model, x, shapes = _Fn(lambda x: torch.cat([x, x])), torch.randn(3, 4), ({0: "n"},)
    ours, theirs = _ours(model, (x,), dynamic_shapes=shapes), \
        _theirs(model, (x,), dynamic_shapes=shapes)
    assert _named_dims(ours.graph.output) == _named_dims(theirs.graph.output) == [["2*n", 4]]
    _assert_same_runs(ours, theirs, torch.randn(5, 4))


# -- 3. kwargs with a tuple dynamic_shapes ------------------------------------------------
class _Keywords(torch.nn.Module):
    def forward(self, x: torch.Tensor, kw1: torch.Tensor | None = None,
                kw2: torch.Tensor | None = None) -> torch.Tensor:
        return x.sum() + kw1.sum() * 2 + kw2.sum() * 3


def test_tuple_dynamic_shapes_follow_the_signature_with_kwargs_in_any_order() -> None:
    x, a, b = torch.randn(3, 4), torch.randn(3), torch.randn(5)
    dim = torch.export.Dim("B")
    options = {"kwargs": {"kw2": b, "kw1": a}, "dynamic_shapes": (None, {0: dim}, None)}
    ours = _ours(_Keywords(), (x,), **options)
    theirs = _theirs(_Keywords(), (x,), **options)
    assert _signature(ours) == _signature(theirs)
    shapes = {v.name: _dims(v) for v in ours.graph.input}
    assert shapes == {"x": [3, 4], "kw1": ["B"], "kw2": [5]}
    assert [v.name for v in ours.graph.input] == [v.name for v in theirs.graph.input]
    a7 = torch.randn(7)
    _assert_same_runs(ours, theirs, x, b, a7)  # inputs in call order: x, kw2, kw1
    want = _Keywords()(x, kw1=a7, kw2=b).numpy()
    np.testing.assert_allclose(_run(ours, x, b, a7)[0], want, rtol=1e-5)


# -- 6. the result offers torch.onnx's ONNXProgram surface --------------------------------
class _Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x: torch.Tensor, scale: torch.Tensor | None = None) -> Any:
        y = self.fc(x)
        return y * scale if scale is not None else y, x.sum()


@pytest.mark.parametrize("dynamo", [True, False])
def test_the_result_has_onnx_programs_surface(tmp_path, dynamo) -> None:
    model, x = _Mlp().eval(), torch.randn(2, 4)
    scale = torch.randn(3)
    result = oxport.export(model, (x,), kwargs={"scale": scale}, dynamo=dynamo,
                           dynamic_shapes=({0: "batch"}, None) if dynamo else None)
    program = _theirs(model, (x,), kwargs={"scale": scale}) if dynamo else None
    assert isinstance(result.model_proto, onnx.ModelProto)
    assert [v.name for v in result.model_proto.graph.input] == ["x", "scale"]
    # called like the model: ONNX Runtime's outputs as torch tensors, eager's values
    x5 = torch.randn(5 if dynamo else 2, 4)
    got = result(x5, scale=scale)
    assert isinstance(got, tuple) and all(isinstance(t, torch.Tensor) for t in got)
    with torch.no_grad():
        want = model(x5, scale=scale)
    for mine, eager in zip(got, want, strict=True):
        torch.testing.assert_close(mine, eager, rtol=1e-5, atol=1e-5)
    if program is not None:
        assert _signature(result.model_proto) == _signature(program)
    result.release()
    assert result.optimize() is None
    torch.testing.assert_close(result(x5, scale=scale)[0], want[0], rtol=1e-5, atol=1e-5)
    # save(path), as torch.onnx's ONNXProgram.save, with its keywords
    result.save(tmp_path / "m.onnx")
    saved = onnx.load(tmp_path / "m.onnx")
    assert saved == result.model_proto
    result.save(tmp_path / "light.onnx", include_initializers=False)
    assert not onnx.load(tmp_path / "light.onnx").graph.initializer
    result.save(tmp_path / "inputs.onnx", keep_initializers_as_inputs=True)
    as_inputs = onnx.load(tmp_path / "inputs.onnx")
    names = [v.name for v in as_inputs.graph.input]
    assert names[:2] == ["x", "scale"] and {"fc.weight", "fc.bias"} <= set(names)
    session = ort.InferenceSession(as_inputs.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    weight = torch.zeros(3, 4)
    out = session.run(None, {"x": x5.numpy(), "scale": scale.numpy(),
                             "fc.weight": weight.numpy(), "fc.bias": model.fc.bias.detach().numpy()})
    np.testing.assert_allclose(out[0], (model.fc.bias.detach() * scale).expand(len(x5), 3).numpy(),
                               rtol=1e-5)


def test_the_result_has_the_rest_of_onnx_programs_methods() -> None:
    """initialize_inference_session, call_reference, compute_values, rename_axes and
    apply_weights, used as on torch.onnx's ONNXProgram: the same values."""
    model, x = _Mlp().eval(), torch.randn(2, 4)
    scale, x5 = torch.randn(3), torch.randn(5, 4)
    result = oxport.export(model, (x,), kwargs={"scale": scale}, dynamo=True,
                           dynamic_shapes=({0: "batch"}, None))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(model, (x,), kwargs={"scale": scale}, dynamo=True,
                                    dynamic_shapes=({0: "batch"}, None), verbose=False)
    made = []

    def initializer(source: str | bytes) -> ort.InferenceSession:
        made.append(type(source))
        return ort.InferenceSession(source, providers=["CPUExecutionProvider"])

    for onnx_program in (result, program):
        onnx_program.initialize_inference_session(initializer)
    assert made == [bytes, bytes]
    want = model(x5, scale=scale)[0].detach()
    for onnx_program in (result, program):
        torch.testing.assert_close(onnx_program(x5, scale=scale)[0], want, rtol=1e-5,
                                   atol=1e-5)
        torch.testing.assert_close(onnx_program.call_reference(x5, scale=scale)[0], want,
                                   rtol=1e-5, atol=1e-5)
    # an intermediate value: the Linear's output, before the scale
    linear = next(n.output[0] for n in result.model_proto.graph.node if n.op_type == "Gemm")
    (hidden,) = result.compute_values([linear], (x5,), {"scale": scale})
    torch.testing.assert_close(hidden, model.fc(x5).detach(), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="no value named 'nope'"):
        result.compute_values(["nope"], (x5,), {"scale": scale})
    result.rename_axes({"batch": "rows"})
    assert _dims(result.model_proto.graph.input[0]) == ["rows", 4]
    assert _dims(result.model_proto.graph.output[0]) == ["rows", 3]
    torch.testing.assert_close(result(x5, scale=scale)[0], want, rtol=1e-5, atol=1e-5)
    zeros = {"fc.weight": torch.zeros(3, 4), "fc.bias": torch.ones(3)}
    with pytest.warns(UserWarning, match="no weight 'missing'"):
        result.apply_weights({**zeros, "missing": torch.ones(1)})
    program.apply_weights(zeros)
    program.release()  # (torch.onnx keeps a session made before; oxport drops it)
    for onnx_program in (result, program):
        torch.testing.assert_close(onnx_program(x5, scale=scale)[0],
                                   scale.expand(5, 3), rtol=1e-6, atol=1e-6)


# -- 7. dict keys and namedtuple fields name the outputs ----------------------------------
_Output = collections.namedtuple("_Output", ["logits", "hidden"])


class _Dict(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"a": x + 1, "b": x * 2}


class _Named(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> _Output:
        return _Output(logits=x.softmax(-1), hidden=x.relu())


@pytest.mark.parametrize("model, names", [(_Dict(), ["a", "b"]),
                                          (_Named(), ["logits", "hidden"])], ids=["dict", "named"])
def test_dict_keys_name_the_outputs_as_on_the_trace_path(model, names) -> None:
    x = torch.randn(3, 4)
    ours = _ours(model, (x,), dynamic_shapes=({0: "batch"},))
    traced = oxport.export(model, (x,)).model_proto
    theirs = _theirs(model, (x,), dynamic_shapes=({0: "batch"},))
    assert [v.name for v in ours.graph.output] == names == [v.name for v in traced.graph.output]
    assert _signature(ours) == _signature(theirs)
    _assert_same_runs(ours, theirs, torch.randn(6, 4))


# -- 8. dynamic_axes on an axis the code makes static -------------------------------------
class _FixedRows(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(3, 4) + 1


def test_dynamic_axes_the_code_makes_static_are_static_and_named_by_input() -> None:
    """torch.onnx fails here (torch.export refuses the Dim.DYNAMIC it makes of the axis);
    oxport warns naming the input and keeps the axis static, as docs/export.md says."""
    x = torch.randn(3, 4)
    with pytest.warns(UserWarning, match=r"makes static: inp axis 0 \('b'\) = 3") as caught:
        result = oxport.export(_FixedRows(), (x,), dynamo=True, input_names=["inp"],
                               dynamic_axes={"inp": {0: "b"}})
    assert not any("tensors_0" in str(w.message) for w in caught)
    proto = result.model_proto
    assert _dims(proto.graph.input[0]) == [3, 4]
    np.testing.assert_allclose(_run(proto, x)[0], _FixedRows()(x).numpy())
    with warnings.catch_warnings(), pytest.raises(Exception, match="torch.export"):
        warnings.simplefilter("ignore")
        torch.onnx.export(_FixedRows(), (x,), dynamo=True, verbose=False, input_names=["inp"],
                          dynamic_axes={"inp": {0: "b"}})


# -- 9. the trace path names output dims after the dynamic axes they equal ----------------
class _Attention(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(100, 8)
        self.attention = torch.nn.MultiheadAttention(8, 2, batch_first=True)
        self.head = torch.nn.Linear(8, 10)

    def forward(self, ids: torch.Tensor) -> dict[str, torch.Tensor]:
        h = self.embed(ids)
        b, s = ids.shape
        h = h.view(b, s, 2, 4).transpose(1, 2).reshape(b, s, 8)
        h = self.attention(h, h, h, need_weights=False)[0]
        return {"logits": self.head(torch.relu(h))}


def test_trace_path_output_dims_are_named_as_torch_onnx_names_them() -> None:
    model, ids = _Attention().eval(), torch.randint(0, 100, (2, 5))
    axes = {"ids": {0: "batch", 1: "seq"}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = oxport.export(model, (ids,), input_names=["ids"], output_names=["logits"],
                             dynamic_axes=axes).model_proto
        buffer = io.BytesIO()
        torch.onnx.export(model, (ids,), buffer, input_names=["ids"], output_names=["logits"],
                          dynamic_axes=axes, dynamo=False)
    theirs = onnx.load_from_string(buffer.getvalue())
    exported = _ours(model, (ids,), dynamic_shapes=({0: "batch", 1: "seq"},))
    assert _dims(ours.graph.output[0]) == ["batch", "seq", 10] == _dims(theirs.graph.output[0])
    assert _dims(exported.graph.output[0]) == ["batch", "seq", 10]
    again = torch.randint(0, 100, (3, 7))
    with torch.no_grad():
        want = model(again)["logits"].numpy()
    np.testing.assert_allclose(_run(ours, again)[0], want, rtol=1e-4, atol=1e-5)
    # torch.onnx's file bakes MultiheadAttention's sizes in: compared at the export's only
    np.testing.assert_allclose(_run(ours, ids)[0], _run(theirs, ids)[0], rtol=1e-4, atol=1e-5)


def test_trace_path_leaves_a_dim_open_where_the_name_is_not_certain() -> None:
    """A reshape whose ``-1`` is a product of two dynamic axes names no input dim."""
    class Flatten(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.reshape(-1, 4) * 2

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        proto = oxport.export(Flatten(), (torch.randn(2, 3, 4),), input_names=["x"],
                              dynamic_axes={"x": {0: "b", 1: "s"}}).model_proto
    assert _dims(proto.graph.output[0])[1] == 4
    assert _dims(proto.graph.output[0])[0] not in ("b", "s")
    again = torch.randn(3, 5, 4)
    np.testing.assert_allclose(_run(proto, again)[0], again.reshape(-1, 4).numpy() * 2)


def _tiny_transformer(kind: str) -> torch.nn.Module:
    transformers = pytest.importorskip("transformers")
    if kind == "gpt2":
        config = transformers.GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=99,
                                         n_positions=64, use_cache=False)
        return transformers.GPT2LMHeadModel(config).eval()
    config = transformers.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=37, vocab_size=99,
                                     max_position_embeddings=64)
    return transformers.BertModel(config).eval()


@pytest.mark.parametrize("kind", ["gpt2", "bert"])
def test_trace_path_names_transformer_output_dims_as_the_dynamo_path_does(kind) -> None:
    """Sizes computed at run time (``Range(0, seq)``, ``position_ids[:, :seq]``, views with
    ``-1``) keep the axis names on the trace path as on the torch.export one."""
    model, ids = _tiny_transformer(kind), torch.randint(0, 99, (2, 7))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = oxport.export(model, (ids,), input_names=["input_ids"],
                               dynamic_axes={"input_ids": {0: "batch", 1: "seq"}}).model_proto
    exported = _ours(model, (ids,), dynamic_shapes=({0: "batch", 1: "seq"},))
    assert _named_dims(traced.graph.output) == _named_dims(exported.graph.output)
    assert None not in [dim for dims in _named_dims(traced.graph.output) for dim in dims]
    again = torch.randint(0, 99, (3, 11))
    with torch.no_grad():
        want = [t.numpy() for t in model(again).to_tuple()]
    for got, eager in zip(_run(traced, again), want, strict=True):
        np.testing.assert_allclose(got, eager, rtol=1e-4, atol=1e-4)
