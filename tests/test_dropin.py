"""oxport.export as a drop-in for torch.onnx.export: torch's enums, torch 2.13's keywords,
the seed's positional order, and the same graph signature as torch.onnx's TorchScript path."""

from __future__ import annotations

import io
import warnings
from typing import List, Optional, Tuple

import numpy as np
import onnx
import pytest
import torch

import oxport
from oxport.errors import InvalidExportArgumentError
from oxport.registry import Provenance, Registrar, SymbolicRegistry
from oxport.types import JitScalarType, OperatorExportTypes, TrainingMode
from tests.helpers import load


class AddOptional(torch.nn.Module):
    def forward(self, x, y=None):
        return x.relu() if y is None else x + y


def test_torch_enums_are_accepted_and_compare_equal():
    assert TrainingMode(torch.onnx.TrainingMode.PRESERVE) is TrainingMode.PRESERVE
    assert OperatorExportTypes(torch.onnx.OperatorExportTypes.ONNX_FALLTHROUGH) \
        is OperatorExportTypes.ONNX_FALLTHROUGH
    assert JitScalarType(torch.onnx.JitScalarType.BFLOAT16) is JitScalarType.BFLOAT16
    assert TrainingMode.EVAL == torch.onnx.TrainingMode.EVAL
    assert TrainingMode.EVAL != torch.onnx.TrainingMode.TRAINING
    assert OperatorExportTypes.ONNX == torch.onnx.OperatorExportTypes.ONNX
    with pytest.raises(ValueError):  # a member of another enum is not taken by its name
        TrainingMode(torch.onnx.OperatorExportTypes.ONNX)


def test_seed_positional_call_with_torch_enums():
    buffer = io.BytesIO()
    oxport.export(AddOptional(), (torch.randn(2, 3),), buffer, True, False,
                  torch.onnx.TrainingMode.EVAL, ["x"], ["out"],
                  torch.onnx.OperatorExportTypes.ONNX, 17, True, {"x": {0: "batch"}})
    proto = load(buffer)
    assert [i.name for i in proto.graph.input] == ["x"]
    assert [o.name for o in proto.graph.output] == ["out"]
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert proto.opset_import[0].version == 17


def test_torch_2_keywords_with_dynamo_false():
    x = torch.randn(2, 3)
    buffer = io.BytesIO()
    oxport.export(AddOptional(), (x,), buffer, kwargs={"y": x}, dynamo=False,
                  external_data=False, optimize=True, verify=True, report=False,
                  profile=False, dump_exported_program=False, artifacts_dir=".",
                  custom_translation_table=None, verbose=None, opset_version=17,
                  training=torch.onnx.TrainingMode.EVAL,
                  operator_export_type=torch.onnx.OperatorExportTypes.ONNX)
    assert [i.name for i in load(buffer).graph.input] == ["x", "y"]


def test_f_none_converts_without_writing():
    result = oxport.export(AddOptional(), torch.randn(2, 3))
    assert [i.name for i in result.model_proto.graph.input] == ["x"]


@pytest.mark.parametrize("keywords, match", [
    ({"dynamic_shapes": {"x": {0: "batch"}}}, r"dynamic_shapes= is for dynamo=True.*dynamic_axes"),
    ({"training": 7}, r"training=7 is not valid: pass one of TrainingMode.EVAL"),
    ({"operator_export_type": torch.onnx.TrainingMode.EVAL},
     r"operator_export_type=.* is not valid: pass one of OperatorExportTypes.ONNX"),
    ({"kwargs": [1]}, r"kwargs must be a dict"),
])
def test_bad_drop_in_arguments_name_the_fix(tmp_path, keywords, match):
    target = tmp_path / "m.onnx"
    with pytest.raises(InvalidExportArgumentError, match=match):
        oxport.export(AddOptional(), (torch.randn(2, 3),), target, **keywords)
    assert not target.exists()


def test_verify_failure_writes_nothing(tmp_path):
    class Wrong(torch.nn.Module):  # eager and ONNX differ: a symbolic that adds 1
        def forward(self, x):
            return torch.ops.aten.elu(x)

    def bad_elu(g, x, *rest):
        return g.op("Add", x, g.op("Constant", value_t=torch.tensor(1.0)))

    oxport.register_custom_op_symbolic("aten::elu", bad_elu, 9)
    target = tmp_path / "m.onnx"
    try:
        with pytest.raises(oxport.diagnose.verification.VerificationError):
            oxport.export(Wrong(), (torch.randn(2, 3),), target, verify=True)
    finally:
        oxport.unregister_custom_op_symbolic("aten::elu", 9)
    assert not target.exists()


# -- the graph signature of torch.onnx's TorchScript path --------------------------------
class Scale(torch.nn.Module):
    def forward(self, x, n):
        return x * n


class IgnoresY(torch.nn.Module):
    def forward(self, x, y):
        return x + 1


class ZerosOfRows(torch.nn.Module):
    def forward(self, x):
        return torch.zeros(x.size(0))


class FillInPlace(torch.nn.Module):
    def forward(self, x):
        return x.fill_(2.0)


def _signature(proto: onnx.ModelProto) -> tuple[list, list]:
    from tests.differential import signature
    return signature(proto)


def _torch_onnx(model, args, **options) -> onnx.ModelProto:
    import warnings
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, buffer, dynamo=False, **options)
    return load(buffer)


@pytest.mark.parametrize("model, args, inputs", [
    (Scale(), (torch.randn(2, 3), 3), [("FLOAT", 2), ("INT64", 0)]),
    (Scale(), (torch.randn(2, 3), 2.5), [("FLOAT", 2), ("DOUBLE", 0)]),
    (Scale(), (torch.randn(2, 3), True), [("FLOAT", 2), ("BOOL", 0)]),
    (IgnoresY(), (torch.randn(2, 3), torch.randn(2, 3)), [("FLOAT", 2)]),
    (ZerosOfRows(), (torch.randn(2, 3),), []),
    (FillInPlace(), (torch.randn(2, 3),), []),
], ids=["int", "float", "bool", "unused", "folded", "fill_"])
def test_graph_signature_is_torch_onnx_s(model, args, inputs):
    """The issue's examples: torch.onnx's inputs and outputs, and eager's results."""
    result = oxport.convert(model, args, opset_version=17)
    ours = _signature(result.model_proto)
    assert ours == _signature(_torch_onnx(model, args, opset_version=17))
    assert ours[0] == inputs
    import onnxruntime as ort
    session = ort.InferenceSession(result.to_bytes(), providers=["CPUExecutionProvider"])
    got = session.run(None, result.feeds(args))
    want = model(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    np.testing.assert_allclose(got[0], want.numpy(), rtol=1e-6)


class ScriptedNumbers(torch.nn.Module):
    def forward(self, x, n: int, f: float, b: bool, unused: int):
        y = x * n + f
        if b:
            y = y - 1
        return y


class ScriptedCount(torch.nn.Module):
    def forward(self, x, n: int):
        for _ in range(n):
            x = x + 1
        return x.chunk(n, 0)[0]


class ScriptedPair(torch.nn.Module):
    def forward(self, x, pair: Tuple[int, float]):
        return x * pair[0] + pair[1]


class ScriptedScale(torch.nn.Module):
    def forward(self, x, scale: float):
        return x * scale


_X = torch.randn(4, 3)


@pytest.mark.parametrize("opset", [13, 17, 20])
@pytest.mark.parametrize("model, args, again, inputs", [
    (ScriptedNumbers(), (_X, 3, 2.5, True, 7), (_X, -2, 0.5, False, 1),
     [("FLOAT", 2), ("INT64", 0), ("DOUBLE", 0), ("BOOL", 0)]),
    (ScriptedNumbers(), (_X, 3, 2.5, {"b": True, "unused": 7}), (_X, 2, 1.5, {"b": False,
                                                                         "unused": 1}),
     [("FLOAT", 2), ("INT64", 0), ("DOUBLE", 0), ("BOOL", 0)]),
    (ScriptedCount(), (_X, 2), (_X, 3), [("FLOAT", 2), ("INT64", 0)]),
    (ScriptedPair(), (_X, (2, 0.5)), (_X, (-1, 3.0)),
     [("FLOAT", 2), ("INT64", 0), ("DOUBLE", 0)]),
    (ScriptedScale(), (_X, 2), (_X, 3), [("FLOAT", 2), ("DOUBLE", 0)]),
], ids=["used_and_unused", "by_name", "loop_and_chunk_count", "tuple", "int_for_float"])
def test_scripted_number_arguments_are_inputs_as_in_torch_onnx(model, args, again, inputs,
                                                                opset):
    """A scripted model's int, float and bool arguments are 0-d inputs of the parameter's
    dtype, unused ones dropped, as in torch.onnx; fed other numbers, both files give eager's
    results."""
    import onnxruntime as ort

    from oxport.frontends.arguments import normalize_args
    scripted = torch.jit.script(model)
    result = oxport.convert(scripted, args, opset_version=opset)
    theirs = _torch_onnx(scripted, args, opset_version=opset)
    assert _signature(result.model_proto) == _signature(theirs)
    assert _signature(theirs)[0] == inputs
    positional, named = normalize_args(again)
    want = scripted(*positional, **named).numpy()
    feeds = list(result.feeds(again).values())
    for data in (result.to_bytes(), theirs.SerializeToString()):
        session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
        got, = session.run(None, dict(zip([i.name for i in session.get_inputs()], feeds)))
        np.testing.assert_allclose(got, want, rtol=1e-6)


class ScriptedOptionalCount(torch.nn.Module):
    def forward(self, x, n: Optional[int]):
        return x if n is None else x * n


class ScriptedListOfNumbers(torch.nn.Module):
    def forward(self, x, sizes: List[int]):
        return x * sizes[0]


class ScriptedDefaultCount(torch.nn.Module):
    def forward(self, x, n: int = 3):
        return x * n


@pytest.mark.parametrize("model, args, opset", [
    (ScriptedOptionalCount(), (_X, 3), 17),
    (ScriptedListOfNumbers(), (_X, [2, 3]), 13),
], ids=["optional_int", "list_of_ints"])
def test_scripted_number_arguments_torch_onnx_cannot_run(model, args, opset):
    """The intended differences of docs/scripting.md: torch.onnx's input for an
    Optional[int] (opset 15 on) has a type ONNX Runtime refuses, and it reads a List[int]
    argument's Sequence input with Gather, which ONNX Runtime refuses; oxport's file (an
    int64 input; the same Sequence input, read item by item) loads and gives eager's
    results."""
    import onnxruntime as ort
    scripted = torch.jit.script(model)
    with pytest.raises(Exception, match="INVALID_GRAPH|FAIL"):
        ort.InferenceSession(_torch_onnx(scripted, args, opset_version=opset)
                             .SerializeToString(), providers=["CPUExecutionProvider"])
    result = oxport.convert(scripted, args, opset_version=opset)
    session = ort.InferenceSession(result.to_bytes(), providers=["CPUExecutionProvider"])
    got, = session.run(None, result.feeds(args))
    np.testing.assert_allclose(got, scripted(*args).numpy(), rtol=1e-6)


class ScriptedPad(torch.nn.Module):
    def forward(self, x, pad: List[int]):
        return torch.nn.functional.pad(x, pad)


@pytest.mark.parametrize("pad", [[2, 4], [torch.tensor(2), torch.tensor(4)]],
                         ids=["ints", "int_tensors"])
def test_scripted_list_of_ints_is_a_sequence_input(pad):
    """A List[int] argument (ints, or 0-d int tensors) is a Sequence input of int64 tensors,
    as torch.onnx makes it from opset 11: fed other pads, oxport's file pads by them."""
    scripted = torch.jit.script(ScriptedPad())
    x = torch.randn(2, 2, 4, 4)
    theirs = _torch_onnx(scripted, (x, pad), opset_version=17)
    result = oxport.convert(scripted, (x, pad), opset_version=17)
    ours = result.model_proto
    assert [i.type.WhichOneof("value") for i in ours.graph.input] == \
        [i.type.WhichOneof("value") for i in theirs.graph.input] == \
        ["tensor_type", "sequence_type"]
    import onnxruntime as ort
    session = ort.InferenceSession(result.to_bytes(), providers=["CPUExecutionProvider"])
    feeds = result.feeds((x, pad))
    assert [a.dtype for a in feeds["pad"]] == [np.int64, np.int64]
    np.testing.assert_allclose(session.run(None, feeds)[0], scripted(x, [2, 4]).numpy())
    other = {"x": feeds["x"], "pad": [np.array(1), np.array(3)]}
    np.testing.assert_allclose(session.run(None, other)[0], scripted(x, [1, 3]).numpy())


def test_scripted_list_of_ints_is_hard_coded_below_opset_11():
    """ONNX has no Sequence before opset 11: there the list is hard-coded."""
    scripted = torch.jit.script(ScriptedPad())
    x = torch.randn(2, 2, 4, 4)
    result = oxport.convert(scripted, (x, [2, 4]), opset_version=10)
    assert len(result.model_proto.graph.input) == 1
    import onnxruntime as ort
    session = ort.InferenceSession(result.to_bytes(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, result.feeds((x, [2, 4])))[0],
                               scripted(x, [2, 4]).numpy())


def test_scripted_number_left_to_its_default_is_hard_coded():
    """torch.onnx declares an input for a number parameter left to its default, which args
    give nothing to feed; oxport keeps the default as a constant (docs/scripting.md)."""
    scripted = torch.jit.script(ScriptedDefaultCount())
    theirs = _torch_onnx(scripted, (_X,), opset_version=17)
    assert _signature(theirs)[0] == [("FLOAT", 2), ("INT64", 0)]
    result = oxport.convert(scripted, (_X,), opset_version=17)
    assert _signature(result.model_proto)[0] == [("FLOAT", 2)]
    assert list(result.feeds((_X,))) == ["x"]


class ScriptedOptionalPair(torch.nn.Module):
    def forward(self, x, y: Optional[torch.Tensor] = torch.ones(4, 3),
                z: Optional[torch.Tensor] = torch.zeros(4, 3)):
        if y is not None:
            return x + y
        if z is not None:
            return x - z
        return x


class ScriptedOptionalTuple(torch.nn.Module):
    def forward(self, x, yz: Tuple[Optional[torch.Tensor], Optional[torch.Tensor]]):
        y, z = yz
        if y is not None:
            return x + y
        if z is not None:
            return x - z
        return x


class ScriptedOptionalOnly(torch.nn.Module):
    def forward(self, x: Optional[torch.Tensor] = torch.ones(4, 3),
                y: Optional[torch.Tensor] = torch.zeros(4, 3)):
        if x is not None:
            return x
        if y is not None:
            return y
        return torch.tensor(-1.0)


class ScriptedTensorDefault(torch.nn.Module):
    def forward(self, x, y: torch.Tensor = torch.ones(4, 3)):
        return x + y


def _run(proto: onnx.ModelProto, feeds: list) -> np.ndarray:
    import onnxruntime as ort
    session = ort.InferenceSession(proto.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()][:len(feeds)]
    return session.run(None, {n: f.numpy() for n, f in zip(names, feeds)})[0]


@pytest.mark.parametrize("model, args, feeds", [
    (ScriptedOptionalPair(), (_X, _X * 2, _X * 3), [_X, _X * 2, _X * 3]),
    (ScriptedOptionalPair(), (_X, {"y": _X * 2, "z": _X * 3}), [_X, _X * 2, _X * 3]),
    (ScriptedOptionalTuple(), (_X, (_X * 2, _X * 3)), [_X, _X * 2, _X * 3]),
    (ScriptedOptionalOnly(), (_X, _X * 2), [_X, _X * 2]),
], ids=["positional", "by_name", "tuple", "all_optional"])
def test_optional_tensors_whose_none_checks_fold_stay_inputs(model, args, feeds):
    """torch.onnx keeps an Optional tensor's ``is not None`` check at run time, so its file
    takes every Optional tensor given, though a check oxport folds leaves one unread: oxport
    keeps those inputs too (plain tensors, docs/scripting.md), and both give eager's
    results."""
    scripted = torch.jit.script(model)
    theirs = _torch_onnx(scripted, args, opset_version=17)
    result = oxport.convert(scripted, args, opset_version=17)
    ours = result.model_proto
    assert len(ours.graph.input) == len(theirs.graph.input) == len(feeds)
    assert list(result.feeds(args)) == [i.name for i in ours.graph.input]
    want = scripted(*args[:-1], **args[-1]) if isinstance(args[-1], dict) else scripted(*args)
    for proto in (ours, theirs):
        np.testing.assert_allclose(_run(proto, feeds), want.numpy(), rtol=1e-6)


def test_optional_tensor_left_to_its_default_is_hard_coded():
    """torch.onnx makes an Optional tensor left to its default an input that the caller may
    leave out, and then computes as if it were None, not the default: its file gives y where
    eager gives the default x (ones). oxport hard-codes the default and gives eager's
    result (docs/scripting.md)."""
    scripted = torch.jit.script(ScriptedOptionalOnly())
    y = _X * 2
    want = scripted(y=y).numpy()
    theirs = _torch_onnx(scripted, ({"y": y},), opset_version=17, input_names=["y"])
    assert not np.allclose(_run(theirs, [y]), want)
    result = oxport.convert(scripted, ({"y": y},), opset_version=17, input_names=["y"])
    assert [i.name for i in result.model_proto.graph.input] == ["y"]
    np.testing.assert_allclose(_run(result.model_proto, [y]), want)
    result = oxport.convert(scripted, (_X,), opset_version=17)
    assert len(result.model_proto.graph.input) == 1


def test_tensor_left_to_its_default_is_hard_coded():
    """As a number left to its default: torch.onnx declares an input that args give nothing
    to feed; oxport keeps the default tensor as a constant."""
    scripted = torch.jit.script(ScriptedTensorDefault())
    assert len(_torch_onnx(scripted, (_X,), opset_version=17).graph.input) == 2
    result = oxport.convert(scripted, (_X,), opset_version=17)
    assert len(result.model_proto.graph.input) == 1
    np.testing.assert_allclose(_run(result.model_proto, [_X]), scripted(_X).numpy())


@pytest.mark.parametrize("model, args, options", [
    (ScriptedOptionalTuple(), (_X, (None, _X)), {}),
    (ScriptedOptionalPair(), (_X, _X, None), {"input_names": ["x", "y", "z"]}),
    (ScriptedOptionalPair(), (_X, {"y": None, "z": _X}), {"input_names": ["x", "y", "z"]}),
], ids=["in_a_tuple", "input_names_positional", "input_names_by_name"])
def test_none_arguments_refused_in_torch_onnx_words(model, args, options):
    """Where a None argument leaves an export impossible (in a tuple) or input_names naming
    it, the error says what torch.onnx's does ("args contained 1 None's after
    flattening."), a ValueError as torch.onnx's is."""
    scripted = torch.jit.script(model)
    for export in (_torch_onnx, oxport.convert):
        with pytest.raises(ValueError, match="args contained 1 None's after flattening."):
            export(scripted, args, opset_version=17, **options)
    with pytest.raises(InvalidExportArgumentError):
        oxport.convert(scripted, args, opset_version=17, **options)


class ScriptedRaiseGuard(torch.nn.Module):
    def forward(self, t: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        if float(t) < 0:
            raise ValueError("negative")
        else:
            return torch.ones(3), torch.zeros(3)


class ScriptedRaiseCheck(torch.nn.Module):
    def forward(self, t: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        if float(t) < 0:
            raise ValueError("negative")
        return torch.ones(3), torch.zeros(3)


class ScriptedListLength(torch.nn.Module):
    def forward(self, x):
        rows = x.unbind()
        kept = [rows[0]]
        kept.append(rows[2])
        kept.insert(0, rows[1])
        return torch.ones(len(kept))


@pytest.mark.parametrize("model, arg, inputs", [
    (ScriptedRaiseGuard(), torch.tensor([0.5]), 1),
    (ScriptedRaiseCheck(), torch.tensor([0.5]), 0),
    (ScriptedListLength(), torch.randn(5, 2), 1),
], ids=["raise_guard", "raise_check_without_outputs", "len_of_a_list"])
def test_inputs_torch_onnx_reads_at_run_time_stay(model, arg, inputs):
    """torch.onnx's file computes the condition of an ``if`` that returns values and whose
    other branch only raises (an ``if`` that returns nothing it drops), and the length of a
    list of tensors, at run time; oxport decides both at export, and keeps the inputs they
    read, so the two files take the same feeds."""
    scripted = torch.jit.script(model)
    theirs = _torch_onnx(scripted, (arg,), opset_version=17)
    ours = oxport.convert(scripted, (arg,), opset_version=17).model_proto
    assert len(ours.graph.input) == len(theirs.graph.input) == inputs
    want = scripted(arg)
    want = want[0] if isinstance(want, tuple) else want
    for proto in (ours, theirs):
        np.testing.assert_allclose(_run(proto, [arg][:inputs]), want.numpy())


def test_input_names_name_inputs_before_unused_ones_are_dropped():
    """torch.onnx names the inputs first, then drops the unused: 'b' stays with y."""
    class UsesY(torch.nn.Module):
        def forward(self, x, y):
            return y + 1

    x = torch.randn(2, 3)
    with pytest.warns(oxport.errors.DynamicAxesWarning, match="'zz'") as warned:
        result = oxport.convert(UsesY(), (x, x), input_names=["a", "b"],
                                dynamic_axes={"a": {0: "n"}, "b": {0: "batch"}, "zz": [0]})
    assert warned[0].filename == __file__  # the caller's line, not oxport's
    proto = result.model_proto
    assert [i.name for i in proto.graph.input] == ["b"]
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert result.graph.dropped_inputs == ["a"]
    assert result.input_leaves() == [1]


@pytest.mark.parametrize("forward, y, kept", [
    (lambda x, y: x.view_as(y), torch.randn(6, 4), ["x", "y"]),  # the Reshape is computed
    (lambda x, y: x.fill_(y), torch.tensor(2.0), ["x", "y"]),  # a fill by a run-time value
    (lambda x, y: torch.full_like(x, 1.5) + y, torch.randn(4), ["y"]),  # full_like folds
    (lambda x, y: y.reshape(x.size(0), -1), torch.randn(4, 6), ["y"]),  # size() folds
])
def test_an_input_whose_shape_an_op_reads_stays_unless_the_op_folds_whole(forward, y, kept):
    """torch.onnx folds the ONNX nodes of one source op only all together, when the op's
    result is a constant: an input whose static shape an unfolded op reads stays."""
    class Model(torch.nn.Module):
        def forward(self, x, y):
            return forward(x, y)

    proto = oxport.convert(Model(), (torch.randn(2, 3, 4), y), input_names=["x", "y"]
                           ).model_proto
    assert [i.name for i in proto.graph.input] == kept


def test_a_0d_fill_of_an_input_keeps_the_input():
    """torch.onnx leaves a ConstantOfShape of an empty shape unfolded: the 0-d ``x`` whose
    shape ``full_like`` fills stays an input."""
    class FullLike(torch.nn.Module):
        def forward(self, x):
            return torch.full_like(x, 1.3, dtype=torch.int)

    result = oxport.convert(FullLike(), (torch.tensor(12),))
    assert [i.name for i in result.model_proto.graph.input] == ["x"]
    oxport.testing.check_in_runtime(result, (torch.tensor(5),), {},
                                    torch.tensor(1, dtype=torch.int), rtol=0, atol=0)


def test_a_scripted_input_returned_as_written_keeps_its_static_sizes():
    """``x.fill_(3), x`` scripted: x's sizes are static, so the fill folds and x goes."""
    class Fill(torch.nn.Module):
        def forward(self, x):
            return x.fill_(3), x

    model = torch.jit.script(Fill())
    x = torch.randn(2, 3)
    assert not oxport.convert(model, (x,)).model_proto.graph.input
    dynamic = oxport.convert(model, (x,), input_names=["x"], dynamic_axes={"x": [0]})
    assert [i.name for i in dynamic.model_proto.graph.input] == ["x"]


def test_a_dict_keyed_by_tensors_takes_its_keys_as_inputs_too():
    """As torch.onnx flattens it: each key is an input, before its value."""
    class AddKey(torch.nn.Module):
        def forward(self, pairs):
            key = list(pairs.keys())[0]
            return pairs[key] + key

    pairs = {torch.tensor(1.0): torch.randn(1, 2, 3)}
    result = oxport.convert(AddKey(), (pairs, {}))
    assert len(result.model_proto.graph.input) == 2
    key, value = torch.tensor(5.0), torch.randn(1, 2, 3)
    oxport.testing.check_in_runtime(result, ({key: value},), {}, value + key, rtol=1e-5,
                                    atol=1e-6)


def test_dict_and_namedtuple_outputs_are_named_after_keys_and_fields():
    import collections
    Pair = collections.namedtuple("Pair", "low high")

    class Keyed(torch.nn.Module):
        def forward(self, x):
            return {"logits": x * 2, "pair": Pair(x - 1, x + 1)}

    x = torch.randn(2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing is lost: no warning
        proto = oxport.convert(Keyed(), (x,)).model_proto
    assert [o.name for o in proto.graph.output] == ["logits", "pair.low", "pair.high"]
    named = oxport.convert(Keyed(), (x,), output_names=["scores"]).model_proto
    assert [o.name for o in named.graph.output] == ["scores", "pair.low", "pair.high"]


# -- symbolics written for torch.onnx -----------------------------------------------------
def test_torch_onnx_symbolics_are_refused_naming_the_import():
    from torch.onnx import symbolic_helper as torch_helper

    @torch_helper.parse_args("v", "f")
    def elu(g, x, alpha):
        return g.op("Elu", x, alpha_f=alpha)

    with pytest.raises(oxport.errors.RegistryError,
                       match=r"uses torch.onnx.symbolic_helper.*`from oxport import "
                             r"symbolic_helper`"):
        oxport.register_custom_op_symbolic("aten::elu", elu, 9)
    registry = SymbolicRegistry()
    pack = oxport.OpPack("torch-style")
    pack.symbolic("aten::elu", since=9)(_calls_opset9)  # a pack's symbolic: vetted when used
    pack.register_into(Registrar(registry, Provenance("torch-style")))
    with pytest.raises(oxport.errors.RegistryError,
                       match=r"aten::elu: the symbolic '_calls_opset9' from torch-style cannot "
                             r"run in oxport\. It uses torch.onnx.symbolic_opset9"):
        registry.lookup("aten::elu", 9)


def _calls_opset9(g, x, alpha, *rest):
    import torch.onnx.symbolic_opset9 as opset9
    return opset9.elu(g, x, alpha, 1.0, 1.0)


def test_torch_onnx_helper_failing_at_call_time_is_not_blamed_on_the_plugin():
    """A helper the registration check cannot see (looked up at run time) that fails inside
    torch.onnx gets the import advice, not 'a bug in that plugin'."""
    import importlib
    import sys

    class Cat(torch.nn.Module):
        def forward(self, x):
            return torch.cat([x, x])

    importlib.import_module("torch.onnx.symbolic_helper")  # so that sys.modules has it

    def cat(g, tensors, dim):
        helpers = getattr(sys.modules["torch.onnx"], "symbolic_" + "helper")
        first = oxport.symbolic_helper._unpack_list(tensors)[0]
        helpers._node_get(first.node(), "value")  # asserts it has torch's own graph node
        return g.op("Concat", tensors, axis_i=0)

    oxport.register_custom_op_symbolic("aten::cat", cat, 9)
    try:
        with pytest.raises(oxport.errors.SymbolicError) as info:
            oxport.convert(Cat(), (torch.randn(2, 3),))
    finally:
        oxport.unregister_custom_op_symbolic("aten::cat", 9)
    assert "torch.onnx.symbolic_helper" in str(info.value)
    assert "from oxport import symbolic_helper" in str(info.value)
    assert "bug in that plugin" not in str(info.value)


# -- a script written for torch.onnx, with only its import changed ------------------------
SCRIPT = '''
import torch
from torch.onnx import export  # the one line that changes


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x, scale, unused, bias=None):
        return {"scores": self.fc(x) * scale + bias, "mean": x.mean(dim=1)}


torch.manual_seed(0)
x = torch.randn(2, 4)
export(Net().eval(), (x, 2.5, torch.ones(1)), OUT,
       kwargs={"bias": torch.full((3,), 0.5)}, dynamo=False, export_params=True,
       verbose=False, training=torch.onnx.TrainingMode.EVAL,
       operator_export_type=torch.onnx.OperatorExportTypes.ONNX, opset_version=17,
       do_constant_folding=True, input_names=["x", "scale", "unused", "bias"],
       dynamic_axes={"x": {0: "batch"}, "seq_lengths": {0: "batch"}},
       keep_initializers_as_inputs=False, custom_opsets={}, optimize=True, verify=False,
       report=False, profile=False, dump_exported_program=False,
       custom_translation_table=None)
'''


def test_a_torch_onnx_script_runs_with_only_its_import_changed(tmp_path):
    import runpy
    import warnings

    import onnxruntime as ort

    files = {}
    for exporter in ("torch.onnx", "oxport"):
        path = tmp_path / f"{exporter}.py"
        path.write_text(SCRIPT.replace("from torch.onnx import export",
                                       f"from {exporter} import export"))
        files[exporter] = tmp_path / f"{exporter}.onnx"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            runpy.run_path(str(path), init_globals={"OUT": str(files[exporter])})
        assert any("seq_lengths" in str(w.message) for w in caught), exporter  # both warn
    ours, theirs = (onnx.load(str(files[e])) for e in ("oxport", "torch.onnx"))
    assert _signature(ours) == _signature(theirs)
    assert [i.name for i in ours.graph.input] == [i.name for i in theirs.graph.input] \
        == ["x", "scale", "bias"]
    feeds = {"x": np.random.default_rng(0).standard_normal((5, 4), dtype=np.float32),
             "scale": np.array(0.5), "bias": np.arange(3, dtype=np.float32)}
    got = [ort.InferenceSession(str(files[e]), providers=["CPUExecutionProvider"])
           .run(None, feeds) for e in ("oxport", "torch.onnx")]
    for a, b in zip(*got):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


class DequantizedRelu(torch.nn.Module):
    def forward(self, x):
        return torch.relu(torch.dequantize(x))


class TwoQuantized(torch.nn.Module):
    def forward(self, x):
        return (torch.quantize_per_tensor(x, 0.1, 3, torch.quint8),
                torch.quantize_per_tensor(x, 0.2, 0, torch.qint8))


@pytest.mark.parametrize("model, args, names", [
    (DequantizedRelu(), (torch.quantize_per_tensor(torch.randn(2, 3), 0.1, 2, torch.quint8),),
     ["x_value", "x_scale", "x_zero_point"]),
    (TwoQuantized(), (torch.randn(2, 3),), ["x"]),
], ids=["quantized_input", "quantized_outputs"])
def test_quantized_args_and_outputs_are_value_scale_zero_point(model, args, names):
    """As torch.onnx: a quantized argument is three inputs (uint8 value, float64 scale,
    int64 zero point), a quantized output three outputs; ONNX Runtime gives eager's."""
    import onnxruntime as ort

    from oxport.testing import flatten_expected
    result = oxport.convert(model, args, opset_version=17)
    proto = result.model_proto
    assert _signature(proto) == _signature(_torch_onnx(model, args, opset_version=17))
    assert [i.name for i in proto.graph.input] == names
    session = ort.InferenceSession(result.to_bytes(), providers=["CPUExecutionProvider"])
    got = session.run(None, result.feeds(args))
    want = flatten_expected(model(*args))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy())
