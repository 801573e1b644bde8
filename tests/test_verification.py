"""oxport.diagnose.verification: ``verify`` (ONNX Runtime against eager, dynamic axes proven at a
second size) and ``find_mismatch`` (the seed's bisection report)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

import oxport
from oxport.diagnose.verification import (
    GraphInfo,
    VerificationError,
    VerificationOptions,
    compare,
    find_mismatch,
    verify,
)

SEED_TREE = """\
5 X   __2 X    __1 ✓
id:  |  id: 0 |  id: 00
     |        |
     |        |__1 X (aten::relu)
     |           id: 01
     |
     |__3 X    __1 ✓
        id: 1 |  id: 10
              |
              |__2 X     __1 X (aten::relu)
                 id: 11 |  id: 110
                        |
                        |__1 ✓
                           id: 111"""

LENIENT = VerificationOptions(raise_on_failure=False)


class SeedModel(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.Sequential(
            torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 5), torch.nn.ReLU(),
            torch.nn.Linear(5, 6))

    def forward(self, x):
        return self.layers(x)


@pytest.fixture
def wrong_relu():
    """The seed's deliberately incorrect relu symbolic, registered at opset 15."""
    oxport.register_custom_op_symbolic("aten::relu", lambda g, self: self, 15)
    yield
    oxport.unregister_custom_op_symbolic("aten::relu", 15)


@pytest.fixture
def wrong_neg():
    oxport.register_custom_op_symbolic("aten::neg", lambda g, self: self, 15)
    yield
    oxport.unregister_custom_op_symbolic("aten::neg", 15)


def line_of(fn, text: str) -> int:
    """The file line number of the first line of ``fn`` containing ``text``."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


# -- find_mismatch --------------------------------------------------------------------
def test_find_mismatch_reproduces_the_seed(wrong_relu, capsys):
    torch.manual_seed(0)
    info = find_mismatch(SeedModel(), (torch.randn(2, 3),), opset_version=15)
    printed = capsys.readouterr().out
    assert isinstance(info, GraphInfo) and info.has_mismatch()
    assert [leaf.id for leaf in info.all_mismatch_leaf_graph_info()] == ["01", "110"]
    assert info.mismatch_node_kinds() == {"aten::relu": 2}
    assert info.tree_text() == SEED_TREE
    for banner in ("Mismatch info for graph partition :", "Mismatch error", "Tree:",
                   "Mismatch leaf subgraphs:", "Mismatch node kinds:"):
        assert f" {banner} ".center(80, "=") in printed
    assert "Mismatched elements: 12 / 12 (100.0%)" in printed
    assert "['01', '110']" in printed and "{'aten::relu': 2}" in printed
    # Each mismatching leaf names its node's module, line and the plugin that converted it.
    assert "01: aten::relu (layers.1) at " in printed
    assert printed.count("converted by the symbolic from register_custom_op_symbolic") == 2


def test_graph_info_queries(wrong_relu, capsys):
    info = find_mismatch(SeedModel(), (torch.randn(2, 3),), opset_version=15)
    capsys.readouterr()
    assert info.essential_node_count() == 5
    assert info.essential_node_kinds() == {"aten::linear", "aten::relu"}
    leaf = info.find_partition("110")
    assert leaf is not None and leaf.id == "110" and leaf.has_mismatch()
    assert leaf.essential_node_kinds() == {"aten::relu"}
    assert info.find_partition("111").has_mismatch() is False
    assert info.find_partition("0101") is None
    # A leaf is a TorchScript graph of its own with its traced inputs.
    assert len(leaf.input_args) == 1 and leaf.input_args[0].shape == (2, 5)
    assert [n.kind() for n in leaf.graph.nodes()] == ["aten::relu"]
    assert "register_custom_op_symbolic" in leaf.provenance()[0]


def test_find_mismatch_on_a_correct_model(capsys):
    info = find_mismatch(SeedModel(), (torch.randn(2, 3),), opset_version=15)
    assert not info.has_mismatch()
    assert info.all_mismatch_leaf_graph_info() == [] and info.mismatch_node_kinds() == {}
    assert info.upper_graph_info is None
    assert "No mismatch found." in capsys.readouterr().out


class GradModeBranch(torch.nn.Module):
    """Takes another path under no_grad, as PyTorch's transformer layers' fast path does."""

    def forward(self, x):
        return x.neg() if torch.is_grad_enabled() else x.abs()


def test_find_mismatch_traces_in_the_callers_grad_mode_as_export_does(capsys):
    x = torch.randn(2, 3)
    for grad, kind in ((True, "aten::neg"), (False, "aten::abs")):
        with torch.set_grad_enabled(grad):
            info = find_mismatch(GradModeBranch(), (x,), opset_version=15)
            exported = oxport.convert(GradModeBranch(), (x,), opset_version=15)
        assert [n.kind() for n in info.graph.nodes()] == [kind]
        assert [n.op_type for n in exported.model_proto.graph.node] == [kind[6:].title()]


class Branchy(torch.nn.Module):
    """Sizes, lists and constants cross the partition boundaries."""

    def forward(self, x):
        a, b = x.split(2, dim=1)
        y = torch.cat([a.neg(), b * 2], dim=1)
        return y.view(y.size(0), -1, 2).sum(-1)


def test_find_mismatch_isolates_one_op_among_lists_and_sizes(wrong_neg, capsys):
    info = find_mismatch(Branchy(), (torch.randn(3, 4),), opset_version=15)
    capsys.readouterr()
    leaves = info.all_mismatch_leaf_graph_info()
    assert [leaf.essential_node_kinds() for leaf in leaves] == [{"aten::neg"}]
    assert info.mismatch_node_kinds() == {"aten::neg": 1}


torch.library.define("verification_test::twice", "(Tensor x) -> Tensor")


@torch.library.impl("verification_test::twice", "cpu")
def _twice(x):
    return x * 2


def test_find_mismatch_reports_a_partition_that_fails_to_convert(capsys):
    class Custom(torch.nn.Module):
        def forward(self, x):
            return torch.ops.verification_test.twice(x.tanh()).relu()

    info = find_mismatch(Custom(), (torch.randn(2, 3),), opset_version=15)
    capsys.readouterr()
    (leaf,) = info.all_mismatch_leaf_graph_info()
    assert leaf.essential_node_kinds() == {"verification_test::twice"}
    assert leaf.mismatch_error.startswith("UnsupportedOperatorError")
    assert "no plugin (it failed to convert)" in leaf.provenance()[0]


# -- find_mismatch through the torch.export front end -----------------------------------
def test_find_mismatch_dynamo_reproduces_the_seed_with_fx_source_lines(wrong_relu, capsys):
    torch.manual_seed(0)
    info = find_mismatch(SeedModel(), (torch.randn(2, 3),), opset_version=15, dynamo=True,
                         verbose=True)
    printed = capsys.readouterr().out
    assert info.tree_text() == SEED_TREE
    assert [leaf.id for leaf in info.all_mismatch_leaf_graph_info()] == ["01", "110"]
    assert info.mismatch_node_kinds() == {"aten::relu": 2}
    assert info.essential_node_kinds() == {"aten::linear", "aten::relu"}
    # The FX node's stack trace gives the line; its nn_module_stack the module.
    line = line_of(SeedModel.forward, "self.layers(x)")
    assert f"01: aten::relu (layers.1) at {__file__}({line}): forward, converted by the " \
        "symbolic from register_custom_op_symbolic" in printed
    assert " torch.export graph ".center(80, "=") in printed
    assert f"%relu = aten::relu(%linear)  # {__file__}({line}): forward" in printed
    # A leaf is a source graph of its own, fed with the values torch.fx computed.
    leaf = info.find_partition("110")
    assert [n.kind() for n in leaf.graph.nodes()] == ["aten::relu"]
    assert len(leaf.input_args) == 1 and leaf.input_args[0].shape == (2, 5)
    assert not isinstance(leaf.input_args[0], torch._subclasses.FakeTensor)


def test_find_mismatch_dynamo_on_a_correct_model_and_an_exported_program(wrong_neg, capsys):
    assert not find_mismatch(SeedModel(), (torch.randn(2, 3),), opset_version=15,
                             dynamo=True).has_mismatch()
    program = torch.export.export(Branchy(), (torch.randn(3, 4),))
    info = find_mismatch(program, (torch.randn(3, 4),), opset_version=15)
    capsys.readouterr()
    assert [leaf.essential_node_kinds() for leaf in info.all_mismatch_leaf_graph_info()] \
        == [{"aten::neg"}]


class Cond(torch.nn.Module):
    def forward(self, x):
        y = x * 3
        y = torch.cond(y.sum() > 0, lambda t: t.neg() + 1, lambda t: t - 1, (y,))
        return y.relu().sum(0)


def test_find_mismatch_dynamo_names_the_op_inside_a_cond_branch(wrong_neg, capsys):
    info = find_mismatch(Cond(), (torch.ones(2, 3),), opset_version=15, dynamo=True)
    capsys.readouterr()
    (leaf,) = info.all_mismatch_leaf_graph_info()
    assert leaf.essential_node_kinds() == {"prim::If"}
    # The branch's ops are at the torch.cond call (not in torch.fx's generated code).
    where = f"{__file__}({line_of(Cond.forward, 'torch.cond')}): forward"
    lines = leaf.provenance()
    assert lines[0].startswith(f"prim::If at {where}")
    assert f"  inside: aten::neg at {where}, converted by the symbolic from " \
        "register_custom_op_symbolic" in lines


def test_find_mismatch_dynamo_reports_a_partition_that_fails_to_convert(capsys):
    @torch.library.custom_op("verification_test::thrice", mutates_args=())
    def thrice(x: torch.Tensor) -> torch.Tensor:
        return x * 3

    thrice.register_fake(lambda x: torch.empty_like(x))

    class Custom(torch.nn.Module):
        def forward(self, x):
            return thrice(x.tanh()).relu()

    info = find_mismatch(Custom(), (torch.randn(2, 3),), opset_version=15, dynamo=True)
    capsys.readouterr()
    (leaf,) = info.all_mismatch_leaf_graph_info()
    assert leaf.essential_node_kinds() == {"verification_test::thrice"}
    assert leaf.mismatch_error.startswith("UnsupportedOperatorError")


# -- verify ---------------------------------------------------------------------------
class Flatten(torch.nn.Module):
    def forward(self, x):
        return x.reshape(x.shape[0], -1).relu()


class FixedRows(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        return y.reshape(3, -1)


class PythonInt(torch.nn.Module):
    def forward(self, x):
        rows = int(x.shape[0])
        return x.view(rows, -1) * 2


def test_verify_passes_and_proves_the_dynamic_axis():
    result = verify(Flatten(), (torch.randn(3, 4, 2),), input_names=["x"], output_names=["y"],
                    dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    assert result.ok and len(result.runs) == 2
    second = result.runs[1]
    assert second.input_shapes == {"x": (4, 4, 2)} and second.outputs[0].actual_shape == (4, 8)
    assert result.max_abs_error < 1e-6 and result.max_rel_error < 1e-6
    assert "passed" in result.summary()


def test_verify_catches_a_reshape_to_the_traced_batch_and_names_the_line():
    line = line_of(FixedRows.forward, "reshape(3, -1)")
    with pytest.raises(VerificationError) as caught:
        verify(FixedRows(), (torch.randn(3, 4),), input_names=["x"], output_names=["y"],
               dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    message = str(caught.value)
    assert "'batch'" in message and "stays 3" in message
    assert f"test_verification.py({line}): forward" in message
    assert "Reshape with the constant [3, -1]" in message
    problem = caught.value.result.axis_problems[0]
    assert problem.dim_name == "batch" and problem.where == "output 'y' axis 0"


def test_verify_notes_a_frozen_axis_that_no_output_declares():
    result = verify(FixedRows(), (torch.randn(3, 4),), input_names=["x"],
                    dynamic_axes={"x": {0: "batch"}}, options=LENIENT)
    line = line_of(FixedRows.forward, "reshape(3, -1)")
    assert result.ok  # the model itself fixes the size: ONNX agrees with PyTorch
    assert any("fixed at 3" in note and f"({line}): forward" in note for note in result.notes)
    # PyTorch rejected batch 4 (12 rows do not split in 3): the note names the line too.
    assert any("PyTorch rejects 'batch' = 4" in n and f":{line}:" in n for n in result.notes)


@pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning")
def test_verify_names_the_line_of_a_python_int_from_a_size():
    with pytest.warns(UserWarning, match=r"\(batch\) is converted to a Python number"):
        result = verify(PythonInt(), (torch.randn(3, 4),), input_names=["x"],
                        dynamic_axes={"x": {0: "batch"}}, options=LENIENT)
    assert not result.ok
    (problem,) = result.axis_problems
    assert problem.where == "input 'x' axis 0"
    view = line_of(PythonInt.forward, "x.view(rows")
    cast = line_of(PythonInt.forward, "int(x.shape[0])")
    text = problem.describe()
    assert f"({view}): forward (aten::view gets the constant 3 while tracing but 4" in text
    assert f"test_verification.py:{cast}: rows = int(x.shape[0])" in text
    assert "ONNX Runtime failed in Reshape node" in text and "oxport.shape" in text


def test_verify_when_pytorch_itself_rejects_other_sizes():
    class Fixed(torch.nn.Module):
        def forward(self, x):
            return x.reshape(3, 4) + 1

    result = verify(Fixed(), (torch.randn(3, 4),), input_names=["x"],
                    dynamic_axes={"x": [0]}, options=LENIENT)
    (problem,) = result.axis_problems
    assert problem.dim_name == "x_dynamic_axes_1" and "PyTorch itself fails" in problem.message
    assert f":{line_of(Fixed.forward, 'reshape(3, 4)')}: return x.reshape(3, 4)" in \
        problem.culprits[0]


def test_verify_reports_numeric_mismatch_with_errors(wrong_relu):
    class Act(torch.nn.Module):
        def forward(self, x):
            return x.relu() + 1

    result = verify(Act(), (torch.randn(4, 5),), opset_version=15, options=LENIENT)
    assert not result.ok
    (out,) = result.runs[0].outputs
    assert not out.ok and 0 < out.mismatched <= out.total == 20
    assert out.max_abs_error > 0 and "Tensor-likes are not close!" in out.message
    # Half the elements may differ: with 100% allowed, the same export passes.
    loose = VerificationOptions(acceptable_error_percentage=100, raise_on_failure=False)
    assert verify(Act(), (torch.randn(4, 5),), opset_version=15, options=loose).ok


def test_verify_uses_the_second_shape_policy_and_input_generator():
    seen = []

    def generate(name, shape, example):
        seen.append((name, shape))
        return torch.ones(shape)

    options = VerificationOptions(second_shape=lambda name, axis, size: size * 5,
                                  input_generator=generate)
    result = verify(Flatten(), (torch.randn(2, 3),), input_names=["x"],
                    dynamic_axes={"x": {0: "n"}}, options=options)
    assert seen == [("x", (10, 3))] and result.runs[1].input_shapes == {"x": (10, 3)}
    shrink = verify(Flatten(), (torch.randn(6, 3),), input_names=["x"],
                    dynamic_axes={"x": {0: "n"}},
                    options=VerificationOptions(second_shape="shrink"))
    assert shrink.runs[1].input_shapes == {"x": (5, 3)}
    skipped = verify(Flatten(), (torch.randn(6, 3),), input_names=["x"],
                     dynamic_axes={"x": {0: "n"}}, options=VerificationOptions(second_shape=None))
    assert len(skipped.runs) == 1


def test_verify_moves_inputs_sharing_a_dynamic_axis_together():
    class Add(torch.nn.Module):
        def forward(self, a, b):
            return a + b

    result = verify(Add(), (torch.randn(2, 3), torch.randn(2, 3)), input_names=["a", "b"],
                    dynamic_axes={"a": {0: "batch"}, "b": {0: "batch"}})
    assert result.runs[1].input_shapes == {"a": (3, 3), "b": (3, 3)}


def test_compare_checks_dtype_shape_and_tolerance():
    options = VerificationOptions()
    same = compare("y", torch.tensor([1.0, float("nan")]), np.array([1.0, np.nan], np.float32),
                   options)
    assert same.ok and same.mismatched == 0
    dtype = compare("y", torch.tensor([1, 2]), np.array([1, 2], np.int32), options)
    assert not dtype.ok and "dtype differs" in dtype.message
    shape = compare("y", torch.zeros(2, 3), np.zeros((3, 2), np.float32), options)
    assert not shape.ok and "shape differs" in shape.message
    relaxed = VerificationOptions(check_shape=False)
    assert compare("y", torch.zeros(2, 3), np.zeros((3, 2), np.float32), relaxed).ok
    off = compare("y", torch.tensor([1.0, 2.0]), np.array([1.0, 2.5], np.float32), options)
    assert off.mismatched == 1 and off.max_abs_error == pytest.approx(0.5)
    assert off.max_rel_error == pytest.approx(0.25)
    assert "Greatest absolute difference: 0.5 at index (1,)" in off.message


class Branch(torch.nn.Module):
    def forward(self, x, n: int):
        y = x * 3
        if n > 2:
            y = y.neg() + 1
        else:
            y = y - 1
        return y.relu().sum(0)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_find_mismatch_on_a_scripted_model_names_the_op_inside_the_branch(wrong_neg, capsys):
    info = find_mismatch(torch.jit.script(Branch()), (torch.randn(2, 3), 3), opset_version=15)
    capsys.readouterr()
    (leaf,) = info.all_mismatch_leaf_graph_info()
    assert leaf.essential_node_kinds() == {"prim::If"}
    lines = leaf.provenance()
    assert lines[0].startswith("prim::If at ")
    neg = line_of(Branch.forward, "y.neg()")
    assert any(line.startswith("  inside: aten::neg at ") and f"line {neg}" in line
               and line.endswith("register_custom_op_symbolic") for line in lines)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_verify_a_scripted_model():
    result = verify(torch.jit.script(Flatten()), (torch.randn(3, 4, 2),), input_names=["x"],
                    dynamic_axes={"x": {0: "batch"}})
    assert result.ok and result.runs[1].outputs[0].actual_shape == (4, 8)
