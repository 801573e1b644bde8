"""Scripted models: ScriptModules, ScriptFunctions and traced modules calling scripted code;
the seed's FAQ examples; in-place writes in scripted code; unsupported constructs."""

from __future__ import annotations

import warnings
from typing import List, Optional

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

import oxport
from oxport.errors import InvalidExportArgumentError, OnnxExporterError, UnsupportedOperatorError
from tests.test_control_flow import export_and_run, op_types

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit.script is deprecated

    class ImplicitCastType(torch.jit.ScriptModule):
        @torch.jit.script_method
        def forward(self, x):
            y = x + 2
            return y + 3

    @torch.jit.script
    def pair(x):
        return x + 1, x * 2

    @torch.jit.script
    def fill_rows(x, n: int):
        out = torch.zeros(n, x.size(0))
        for i in range(n):
            out[i] = x * i
        return out

    @torch.jit.script
    def write_windows(x, n: torch.Tensor):
        buffer = torch.zeros(10, 3)
        for i in range(int(n)):
            buffer[i:i + 2] = x + i
        return buffer

    @torch.jit.script
    def clamp_in_loop(x, n: torch.Tensor):
        y = x.clone()
        for i in range(int(n)):
            y.masked_fill_(y > i, float(i))
            y[:, 0] += 1
        return y

    @torch.jit.script
    def accumulate(x, index, n: torch.Tensor):
        y = torch.zeros(5, 3)
        for i in range(int(n)):
            y.index_put_((index,), x + i, accumulate=True)
        return y

    @torch.jit.script
    def write_in_branch(x):
        y = x.clone()
        if bool(x.sum() > 0):
            y.add_(1)
        else:
            y[0] = 5.0
        return y

    @torch.jit.script
    def view_written_in_loop(x, n: torch.Tensor):
        y = x.clone()
        row = y[0]
        for _ in range(int(n)):
            row.mul_(2)
        return y, row

    @torch.jit.script
    def negative_read(data):
        return data[torch.tensor([[1, 2], [2, -3]]), torch.tensor([-2, 3])]

    @torch.jit.script
    def rank2_indices_write(data, new_data):
        data[torch.tensor([[1, 2], [2, 3]]), torch.tensor([2, 3])] = new_data
        return data

    @torch.jit.script
    def split_indices_write(data, new_data):
        data[torch.tensor([2, 3]), :, torch.tensor([1, 2])] = new_data
        return data

    @torch.jit.script
    def negative_write_in_loop(data, new_data, n: torch.Tensor):
        for i in range(int(n)):
            data[torch.tensor([1, -2]), torch.tensor([-2, 3])] = new_data + i
        return data

    @torch.jit.script
    def broadcast_write(data, new_data):
        data[torch.tensor([[0, 2], [1, 1]]), 1:3] = new_data
        return data

    @torch.jit.script
    def reshape_by_item(x, rows):
        return x.reshape(rows.item(), -1)

    @torch.jit.script
    def with_dict(x):
        table = {"a": x}
        return table["a"] * 2

    @torch.jit.script
    def list_of_tuples(x):
        pairs: list[tuple[torch.Tensor, torch.Tensor]] = []
        for i in range(x.size(0)):
            pairs.append((x[i], x[i] * 2))
        return pairs[0][0] + pairs[-1][1]

    @torch.jit.script
    def list_of_lists(x):
        groups: list[list[torch.Tensor]] = []
        for i in range(x.size(0)):
            groups.append([x[i], x[i] * 2])
        return torch.stack([torch.stack(g) for g in groups])

    @torch.jit.script
    def list_of_lists_in_nested_loops(x):
        rows: list[list[torch.Tensor]] = []
        for i in range(x.size(0)):
            row: list[torch.Tensor] = []
            for j in range(x.size(1)):
                row.append(x[i, j] * 2)
            rows.append(row)
        return torch.stack([torch.stack(r) for r in rows])

    @torch.jit.script
    def optional_bias(x, bias: Optional[torch.Tensor] = None, scale: float = 2.0):
        if bias is not None:
            x = x + bias
        return x * scale


class GreedyDecoder(torch.nn.Module):
    """A scripted decoder loop over library modules (their input checks raise on error paths)."""

    def __init__(self):
        super().__init__()
        self.cell = torch.nn.GRUCell(4, 4)
        self.out = torch.nn.Linear(4, 5)
        self.embedding = torch.nn.Embedding(5, 4)

    def forward(self, h, steps: int):
        token = torch.zeros(h.size(0), dtype=torch.long)
        tokens: list[torch.Tensor] = []
        for _ in range(steps):
            h = self.cell(self.embedding(token), h)
            token = self.out(h).argmax(-1)
            tokens.append(token)
        return torch.stack(tokens, 1), h


class ListLoopModel(torch.nn.Module):
    def forward(self, x):
        res = []
        res1 = []
        arr = x.split(2, 0)
        res2 = torch.zeros(3, 4, dtype=torch.long)
        for i in range(len(arr)):
            res.append(arr[i].sum(0, False))
            res1.append(arr[-1 - i].sum(0, False))
            res2 += 1
        return torch.stack(res), torch.stack(res1), res2


class InPlaceIndexedAssignment(torch.nn.Module):
    def forward(self, data, new_data):
        data[1] = new_data
        return data


class CallsPair(torch.nn.Module):
    def forward(self, x):
        a, b = pair(x)
        return a - b


class Stateful(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 4)
        self.norm = torch.nn.BatchNorm1d(4)
        self.repeats = 2

    def forward(self, x, steps: int):
        for _ in range(steps):
            x = torch.relu(self.norm(self.linear(x))) @ self.linear.weight
        return x * self.repeats


def script(module):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return torch.jit.script(module)


def test_implicit_cast_type_gives_float32():
    x = torch.tensor([1.0], dtype=torch.float32)
    proto = export_and_run(ImplicitCastType(), (x,))
    session = ort.InferenceSession(proto.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    out, = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    assert out.dtype == np.float32 and out.tolist() == [6.0]


@pytest.mark.parametrize("opset", [11, 13, 20])
def test_list_loop_model_matches_eager(opset):
    torch.manual_seed(0)
    model = script(ListLoopModel())
    proto = export_and_run(model, (torch.randn(16),), (torch.randn(16),), opset=opset)
    assert "Loop" in op_types(proto)


@pytest.mark.parametrize("scripted", [False, True])
def test_in_place_indexed_assignment(scripted):
    model = script(InPlaceIndexedAssignment()) if scripted else InPlaceIndexedAssignment()
    data, new_data = torch.zeros(3, 4), torch.arange(4).to(torch.float32)
    export_and_run(model, (data, new_data), (torch.ones(3, 4), new_data * 2), opset=11)


def test_scripted_function_returning_a_tuple():
    export_and_run(pair, (torch.ones(2),))
    export_and_run(CallsPair(), (torch.randn(4),))


def test_script_module_freezes_attributes_and_keeps_state_names():
    torch.manual_seed(0)
    model = script(Stateful()).eval()
    proto = export_and_run(model, (torch.randn(5, 3), 2), (torch.randn(5, 3), 3))
    names = {init.name for init in proto.graph.initializer}
    assert {"linear.weight", "linear.bias", "norm.running_mean"} <= names
    assert [i.name for i in proto.graph.input] == ["x", "steps"]  # the int is an input


def test_scripted_decoder_over_library_modules():
    torch.manual_seed(0)
    model = script(GreedyDecoder()).eval()
    export_and_run(model, (torch.randn(2, 4), 5), (torch.randn(2, 4), 2), opset=13)


def test_scripted_lstm_with_an_overloaded_forward():
    torch.manual_seed(0)
    eager = torch.nn.LSTM(4, 5, num_layers=2, batch_first=True).eval()
    x = torch.randn(2, 3, 4)
    proto = oxport.convert(script(eager).eval(), (x,), opset_version=14).model_proto
    onnx.checker.check_model(proto, full_check=True)
    session = ort.InferenceSession(proto.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    out, h, c = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    with torch.no_grad():
        want, (want_h, want_c) = eager(x)
    for got, ref in ((out, want), (h, want_h), (c, want_c)):
        torch.testing.assert_close(torch.from_numpy(got), ref, rtol=1e-4, atol=1e-5)


def test_default_arguments_of_a_scripted_function():
    export_and_run(optional_bias, (torch.ones(2),))
    export_and_run(optional_bias, (torch.ones(2), torch.tensor([1.0, 2.0])))


def test_row_writes_in_a_loop():
    export_and_run(fill_rows, (torch.ones(3), 4), (torch.ones(3), 2))


def test_slice_writes_in_a_loop():
    export_and_run(write_windows, (torch.ones(2, 3), torch.tensor(3)),
                   (torch.ones(2, 3), torch.tensor(7)), opset=11)


def test_masked_fill_and_column_update_in_a_loop():
    torch.manual_seed(0)
    export_and_run(clamp_in_loop, (torch.randn(3, 4) * 5, torch.tensor(3)),
                   (torch.randn(3, 4) * 5, torch.tensor(6)), opset=11)


def test_index_put_accumulating_in_a_loop():
    torch.manual_seed(0)
    export_and_run(accumulate, (torch.randn(2, 3), torch.tensor([1, 3]), torch.tensor(3)),
                   (torch.randn(2, 3), torch.tensor([0, 4]), torch.tensor(1)), opset=16)


def test_writes_in_branches():
    export_and_run(write_in_branch, (torch.ones(3),), (-torch.ones(3),), opset=11)


def test_view_of_an_outer_tensor_written_in_a_loop():
    export_and_run(view_written_in_loop, (torch.ones(2, 3), torch.tensor(3)),
                   (torch.ones(2, 3), torch.tensor(0)), opset=11)


@pytest.mark.parametrize("model, shapes", [
    (negative_read, [(4, 5)]),
    (rank2_indices_write, [(4, 5), (2, 2)]),
    (split_indices_write, [(4, 3, 5), (2, 3)]),
    (broadcast_write, [(3, 4, 5), (5,)]),
], ids=["negative_read", "rank2_write", "split_write", "broadcast_write"])
def test_seed_indexing_patterns_in_scripted_code(model, shapes):
    torch.manual_seed(0)
    export_and_run(model, tuple(torch.randn(*s) for s in shapes), opset=13)


def test_negative_index_write_in_a_loop():
    torch.manual_seed(0)
    export_and_run(negative_write_in_loop, (torch.randn(4, 5), torch.randn(2), torch.tensor(2)),
                   (torch.randn(4, 5), torch.randn(2), torch.tensor(0)), opset=13)


class TracedItem(torch.nn.Module):
    def forward(self, x, rows):
        return x.reshape(rows.item(), -1)


def test_item_warns_when_traced_and_stays_dynamic_when_scripted():
    with pytest.warns(torch.jit.TracerWarning, match="Python number"):
        oxport.convert(TracedItem(), (torch.randn(2, 6), torch.tensor(3)))
    export_and_run(reshape_by_item, (torch.randn(2, 6), torch.tensor(3)),
                   (torch.randn(2, 6), torch.tensor(4)))


def test_dict_is_reported_with_its_source_line():
    with pytest.raises(UnsupportedOperatorError) as info:
        oxport.convert(with_dict, (torch.ones(2),))
    message = str(info.value)
    assert "a dict" in message and "test_scripting.py" in message and "line" in message


def test_list_of_tuples_is_reported_with_its_source_line():
    with pytest.raises(UnsupportedOperatorError, match=r"list of tuples.*test_scripting\.py"):
        oxport.convert(list_of_tuples, (torch.ones(3, 2),))


def test_list_of_lists_through_a_loop_is_reported_with_its_source_line():
    with pytest.raises(OnnxExporterError, match=r"prim::Loop at .*test_scripting\.py.*passes a "
                       r"list of .*Tensor.* through its block.*torch\.stack each inner list"):
        oxport.convert(list_of_lists, (torch.ones(3, 2),), opset_version=17)


def test_list_of_lists_built_in_nested_loops_is_reported_with_its_source_line():
    # torch.onnx writes a file ONNX Runtime cannot load (a sequence of sequences); oxport
    # names the outer loop that carries the list of lists, and what to do instead.
    import io

    x = torch.randn(3, 4)
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(list_of_lists_in_nested_loops, (x,), buffer, opset_version=17,
                          dynamo=False)
    with pytest.raises(Exception, match="Unsupported type proto"):
        ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    with pytest.raises(OnnxExporterError, match=r"prim::Loop at .*test_scripting\.py.*passes a "
                       r"list of .*Tensor.* through its block.*torch\.stack each inner list"):
        oxport.convert(list_of_lists_in_nested_loops, (x,), opset_version=17)


def test_bad_args_for_a_scripted_model():
    with pytest.raises(InvalidExportArgumentError, match="pass one per parameter"):
        oxport.convert(pair, (torch.ones(2), torch.ones(2)))
    with pytest.raises(OnnxExporterError, match="Running the scripted model"):
        oxport.convert(fill_rows, (torch.ones(3), -1))


def test_exporting_scripted_models_raises_no_deprecation_warning():
    model = script(ListLoopModel())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        oxport.convert(model, (torch.randn(16),), opset_version=13)
        oxport.convert(CallsPair(), (torch.randn(4),))
    assert not [w for w in caught if issubclass(w.category, DeprecationWarning)]


def test_onnx_checker_accepts_nested_subgraphs():
    proto = oxport.convert(script(ListLoopModel()), (torch.randn(16),),
                           opset_version=13).model_proto
    onnx.checker.check_model(proto, full_check=True)


def test_the_op_test_runner_runs_traced_cases_scripted_lambdas_too():
    from oxport import testing
    from oxport.registry import OpCase

    registry = testing.registry_view()
    entry = registry.lookup("aten::mul", 17)
    case = OpCase("aten::mul", lambda x: x * torch.arange(3.0) + x.size(1), ((2, 3),))
    runs = testing.expand([entry], [case], front_ends=("script",))
    assert [(r.opset, r.front_end) for r in runs] == [(13, "script"), (17, "script"),
                                                       (20, "script")]
    for case_run in runs:
        testing.run(case_run, registry)
    scripted = testing._script(testing._as_function(case.model))
    assert "aten::mul" in str(scripted.graph)


def test_the_op_test_runner_leaves_a_scripted_modules_running_stats_alone():
    """A scripted module shares its buffers with the eager one but keeps its own training
    flag (True when built): the runner runs it in the case's mode, so an eval case's check
    run does not move the running stats the export then reads."""
    from oxport import testing
    from oxport.registry import OpCase

    norm = torch.nn.BatchNorm2d(3)
    before = norm.running_mean.clone()
    case = OpCase("aten::batch_norm", norm, ((2, 3, 4, 4),))
    registry = testing.registry_view()
    (run,) = testing.expand([registry.lookup("aten::batch_norm", 17)], [case],
                            front_ends=("script",))[1:2]
    testing.run(run, registry)
    assert torch.equal(norm.running_mean, before)


def test_the_op_test_runner_skips_a_case_torchscript_itself_computes_differently():
    """Scripted ``F.embedding(max_norm=...)`` drops its in-place renormalization (TorchScript
    compiles it away; torch.onnx's file has no renorm either): nothing to match eager with."""
    from oxport import testing
    from oxport.registry import OpCase

    case = OpCase("aten::embedding_renorm_",
                  lambda x, w: torch.nn.functional.embedding(x, w, max_norm=1.0),
                  (lambda: torch.tensor([[1, 3]]), (10, 4)))
    registry = testing.registry_view()
    (run,) = testing.expand([registry.lookup("aten::embedding_renorm_", 17)], [case],
                            front_ends=("script",))[1:2]
    with pytest.raises(pytest.skip.Exception, match="TorchScript's own run .* differs"):
        testing.run(run, registry)


def test_scripted_transformer_encoder_with_padding_not_at_the_end():
    """Scripted nn.TransformerEncoder takes the nested path for every padding mask
    (``_nested_tensor_from_mask_left_aligned`` is True). For padding at the end of the rows
    that is eager's path; for padding elsewhere eager takes the unfused path: the positions
    that are not padding match, the padded ones are zeros through the final norm (its bias)
    where eager computed values no position reads."""
    layer = torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)
    model = script(torch.nn.TransformerEncoder(layer, 2, norm=torch.nn.LayerNorm(8)).eval())
    x = torch.randn(3, 5, 8, generator=torch.Generator().manual_seed(0))
    at_end = torch.arange(5) >= torch.tensor([[5], [2], [4]])
    at_start = at_end.flip(1)
    result = oxport.convert(model, (x, {"src_key_padding_mask": at_end}), opset_version=17)
    session = ort.InferenceSession(result.model_proto.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    with torch.no_grad():
        for mask in (at_end, at_start):
            (got,) = session.run(None, {i.name: a.numpy() for i, a in
                                        zip(session.get_inputs(), (x, mask))})
            want = model(x, src_key_padding_mask=mask)
            np.testing.assert_allclose(got[~mask.numpy()], want[~mask].numpy(), atol=1e-5)
            bias = model.norm.bias.numpy()
            np.testing.assert_allclose(got[mask.numpy()], np.broadcast_to(
                bias, got[mask.numpy()].shape), atol=1e-5)
            assert mask is at_end or not np.allclose(got[mask.numpy()], want[mask].numpy())


class _NoneInTupleResult(torch.nn.Module):
    def forward(self, x):
        return (x, (x * 2, None))


@pytest.mark.parametrize("opset", [14, 15, 17])
def test_none_results_are_empty_optionals_from_opset_15(opset):
    """As torch.onnx writes them: an empty Optional of float per None (ONNX Runtime gives
    None back); below opset 15, which has no Optional, they are left out."""
    x = torch.randn(2, 3)
    result = oxport.convert(torch.jit.script(_NoneInTupleResult()), (x,), opset_version=opset)
    proto = result.model_proto
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, result.feeds((x,)))
    expected = [x.numpy(), (x * 2).numpy()] + ([None] if opset >= 15 else [])
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert (g is None) if e is None else np.allclose(g, e)


class _CountsUpTo(torch.nn.Module):
    """A list of ints built in a loop, returned early on one path."""

    def forward(self, x):
        counts = [int(v) for v in range(x.size(1))]
        if x.size(0) > 2:
            return counts
        counts.append(x.size(0) * 7)
        return counts


class _SizeList(torch.nn.Module):
    def forward(self, x):
        return [x.size(0), x.size(1) * 2]


class _SizesUsedInside(torch.nn.Module):
    def forward(self, x):
        sizes: List[int] = []
        for d in range(x.dim()):
            sizes.append(x.size(d) + 1)
        return torch.zeros(sizes) + 1


def _sequence_outputs(proto):
    return [o.type.HasField("sequence_type") for o in proto.graph.output]


@pytest.mark.parametrize("opset", [11, 17])
def test_a_list_of_ints_output_is_a_sequence_of_0d_tensors(opset):
    """As torch.onnx writes a list built at run time: one 0-d int64 per item, the outputs
    eager's list flattens to (any length, none included)."""
    model = torch.jit.script(_CountsUpTo())
    first = torch.ones(2, 3)
    result = oxport.convert(model, (first,), opset_version=opset, input_names=["x"],
                            dynamic_axes={"x": [0, 1]})
    proto = result.model_proto
    assert _sequence_outputs(proto) == [True]
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    for x in (first, torch.ones(4, 2), torch.ones(1, 0)):
        got, = session.run(None, {"x": x.numpy()})
        assert [int(item) for item in got] == model(x)
        assert all(item.shape == () and item.dtype == np.int64 for item in got)


def test_a_list_of_ints_output_is_a_1d_tensor_below_opset_11():
    """Sequences (SplitToSequence) arrive in opset 11: below, the list is one 1-D tensor."""
    x = torch.ones(2, 3)
    proto = oxport.convert(torch.jit.script(_SizeList()), (x,), opset_version=9,
                           input_names=["x"], dynamic_axes={"x": [0, 1]}).model_proto
    assert _sequence_outputs(proto) == [False]
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    got, = session.run(None, {"x": torch.ones(3, 1).numpy()})
    assert got.tolist() == [3, 2]


def test_a_list_of_ints_used_inside_the_graph_stays_a_tensor():
    x = torch.ones(2, 3)
    proto = export_and_run(torch.jit.script(_SizesUsedInside()), (x,), (torch.ones(4, 1),),
                           opset=17, input_names=["x"], dynamic_axes={"x": [0, 1]})
    assert not {"SplitToSequence", "SequenceInsert"} & set(op_types(proto))
    assert _sequence_outputs(proto) == [False]


def test_verify_compares_a_list_output_item_by_item():
    """oxport.verification reads a Sequence output as its items, as eager's list flattens."""
    from oxport.verification import verify
    verify(torch.jit.script(_CountsUpTo()), (torch.ones(2, 3),), opset_version=17,
           input_names=["x"], dynamic_axes={"x": [1]})
