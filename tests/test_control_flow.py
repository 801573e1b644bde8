"""Loops and branches: prim::Loop / prim::If as ONNX Loop / If, checked by ONNX Runtime
against eager PyTorch at inputs that take different branches and trip counts."""

from __future__ import annotations

import warnings
from typing import Optional

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

import oxport
from oxport.errors import OnnxExporterError, UnsupportedOperatorError
from oxport.testing import flatten_expected

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit.script is deprecated

    @torch.jit.script
    def loop(x, y):
        for i in range(int(y)):
            x = x + i
        return x

    @torch.jit.script
    def nested(x, n: torch.Tensor):
        for i in range(int(n)):
            for j in range(i):
                x = x + j * i
        return x

    @torch.jit.script
    def loop_with_if(x, n: torch.Tensor):
        for i in range(int(n)):
            if i % 2 == 0:
                x = x + i
            else:
                x = x * 2
        return x

    @torch.jit.script
    def early_break(x):
        steps = 0
        while steps < 100:
            x = x * 2
            if bool(x.sum() > 50):
                break
            steps += 1
        return x, steps

    @torch.jit.script
    def grow_and_stack(x, n: torch.Tensor):
        rows: list[torch.Tensor] = []
        for i in range(int(n)):
            rows.append(x + i)
        return torch.stack(rows)

    @torch.jit.script
    def read_while_growing(x, n: torch.Tensor):
        rows = [x]
        for i in range(int(n)):
            rows.append(rows[-1] * 2 + i)
        return torch.cat(rows, 0), len(rows)

    @torch.jit.script
    def beam_search(logits, steps: torch.Tensor):
        batch, vocab = logits.size(0), logits.size(1)
        scores = torch.zeros(batch, 2)
        tokens: list[torch.Tensor] = []
        for t in range(int(steps)):
            step = torch.log_softmax(logits * (t + 1), dim=-1)
            candidates = (scores.unsqueeze(-1) + step.unsqueeze(1)).reshape(batch, -1)
            best, index = candidates.topk(2, dim=-1)
            scores = best
            tokens.append(index % vocab)
        return scores, torch.stack(tokens, 1)

    @torch.jit.script
    def find_first(x, n: torch.Tensor):
        found = -1
        for i in range(int(n)):
            if bool(x[i] > 0.5):
                found = i
                break
        return torch.tensor(found)

    @torch.jit.script
    def skip_odd(x, n: torch.Tensor):
        for i in range(1, int(n), 2):
            if i % 3 == 0:
                continue
            x = x * i
        return x

    @torch.jit.script
    def sum_rows(x):
        total = torch.zeros(3)
        for row in x:
            total = total + row
        return total

    @torch.jit.script
    def none_before_loop(x):
        h: Optional[torch.Tensor] = None
        for _ in range(3):
            h = x if h is None else h * 2
        return h

    @torch.jit.script
    def grow_until(x, limit: torch.Tensor):
        rows = [x]
        while len(rows) < int(limit):
            rows.append(rows[-1] * 2)
        return torch.stack(rows)

    @torch.jit.script
    def sign_branch(x):
        if bool(x.sum() > 0):
            y = x * 2
        else:
            y = -x
        return y

    @torch.jit.script
    def checked(x):
        if x.dim() != 2:
            raise ValueError("expected a matrix")
        return x + 1

    @torch.jit.script
    def mixed_dtypes(x):
        if bool(x.sum() > 0):
            y = x
        else:
            y = x.long()
        return y


class LoopModel(torch.nn.Module):
    def forward(self, x, y):
        for i in range(y):
            x = x + i
        return x


class LoopModel2(torch.nn.Module):
    def forward(self, x, y):
        return loop(x, y)


def export_and_run(model, args, *others, opset=None, **kwargs):
    """Export with ``args``; at ``args`` and every ``others`` ONNX Runtime must match eager."""
    result = oxport.convert(model, args, opset_version=opset, **kwargs)
    proto = result.model_proto
    onnx.checker.check_model(proto, full_check=True)
    session = ort.InferenceSession(proto.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    for inputs in (args, *others):
        got = session.run(None, result.feeds(inputs))
        with torch.no_grad():
            want = flatten_expected(model(*[_copy(a) for a in inputs]))
        assert len(got) == len(want)
        for w, g in zip(want, got):
            torch.testing.assert_close(torch.from_numpy(np.asarray(g)), w, rtol=1e-4, atol=1e-5)
    return proto


def _copy(value):
    return value.clone() if isinstance(value, torch.Tensor) else value


def op_types(proto: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in proto.graph.node]


@pytest.mark.parametrize("opset", [9, 11, 20])
def test_seed_loop_model2_gives_37s(opset):
    dummy = torch.ones(2, 3, dtype=torch.long)
    proto = export_and_run(LoopModel2(), (dummy, torch.tensor(5)), (dummy, torch.tensor(0)),
                           opset=opset, input_names=["input_data", "loop_range"])
    assert "Loop" in op_types(proto)
    session = ort.InferenceSession(proto.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    out, = session.run(None, {"input_data": dummy.numpy(), "loop_range": np.array(9)})
    assert out.dtype == np.int64
    assert (out == 37).all() and out.shape == (2, 3)


def test_traced_loop_model_is_unrolled():
    dummy = torch.ones(2, 3, dtype=torch.long)
    proto = oxport.convert(LoopModel(), (dummy, 5)).model_proto
    assert "Loop" not in op_types(proto)
    session = ort.InferenceSession(proto.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    out, = session.run(None, {session.get_inputs()[0].name: dummy.numpy()})
    assert (out == 11).all()


def test_nested_loops():
    export_and_run(nested, (torch.zeros(2), torch.tensor(3)), (torch.ones(2), torch.tensor(6)),
                   (torch.ones(2), torch.tensor(0)))


def test_if_inside_loop():
    export_and_run(loop_with_if, (torch.ones(3), torch.tensor(4)),
                   (torch.ones(3), torch.tensor(7)), (torch.ones(3), torch.tensor(1)))


def test_while_loop_with_break():
    proto = export_and_run(early_break, (torch.ones(2),), (torch.full((2,), 0.1),),
                           (torch.full((2,), 40.0),))
    loop_node = next(n for n in proto.graph.node if n.op_type == "Loop")
    assert loop_node.input[0] == ""  # a while-loop: no trip count


def test_for_loop_with_break():
    export_and_run(find_first, (torch.tensor([0.1, 0.7, 0.9]), torch.tensor(3)),
                   (torch.tensor([0.1, 0.2, 0.3]), torch.tensor(3)), opset=13)


def test_range_with_start_step_and_continue():
    export_and_run(skip_odd, (torch.ones(2), torch.tensor(8)), (torch.ones(2), torch.tensor(1)),
                   (torch.ones(2), torch.tensor(13)))


def test_loop_over_the_rows_of_a_tensor_with_a_dynamic_axis():
    torch.manual_seed(0)
    export_and_run(sum_rows, (torch.randn(4, 3),), (torch.randn(2, 3),), (torch.randn(7, 3),),
                   input_names=["x"], dynamic_axes={"x": [0]})


def test_none_carried_into_a_loop_is_an_optional_output():
    proto = export_and_run(none_before_loop, (torch.ones(2),), opset=16)
    assert proto.graph.output[0].type.HasField("optional_type")
    with pytest.raises(UnsupportedOperatorError, match="opset 16"):
        oxport.convert(none_before_loop, (torch.ones(2),), opset_version=15)


@pytest.mark.parametrize("opset", [11, 13, 20])
def test_list_grown_in_loop_then_stacked(opset):
    proto = export_and_run(grow_and_stack, (torch.ones(2), torch.tensor(3)),
                           (torch.ones(2), torch.tensor(6)), opset=opset)
    assert "Loop" in op_types(proto)


def test_list_read_while_growing_needs_sequences_in_loops():
    export_and_run(read_while_growing, (torch.ones(1, 2), torch.tensor(2)),
                   (torch.ones(1, 2), torch.tensor(5)), opset=13)
    with pytest.raises(UnsupportedOperatorError, match="opset 13"):
        oxport.convert(read_while_growing, (torch.ones(1, 2), torch.tensor(2)), opset_version=11)


def test_while_loop_on_the_length_of_a_growing_list():
    export_and_run(grow_until, (torch.ones(2), torch.tensor(4)), (torch.ones(2), torch.tensor(1)),
                   (torch.ones(2), torch.tensor(7)), opset=13)


def test_list_below_opset_13_names_the_opset():
    """The loop carrying the list is what needs opset 13 (not the cat after it, which
    cannot convert the list the loop did not make)."""
    with pytest.raises(UnsupportedOperatorError, match="opset 13 would support it") as info:
        oxport.convert(read_while_growing, (torch.ones(1, 2), torch.tensor(2)), opset_version=10)
    assert [op.kind for op in info.value.ops] == ["prim::Loop"]


def test_beam_search_like_loop():
    torch.manual_seed(0)
    export_and_run(beam_search, (torch.randn(3, 5), torch.tensor(4)),
                   (torch.randn(3, 5), torch.tensor(7)), (torch.randn(3, 5), torch.tensor(1)),
                   opset=13)


def test_if_takes_both_branches():
    proto = export_and_run(sign_branch, (torch.ones(3),), (-torch.ones(3),))
    assert "If" in op_types(proto)


def test_raising_branch_is_dropped():
    proto = export_and_run(checked, (torch.ones(2, 3),), (torch.zeros(2, 3),))
    assert "If" not in op_types(proto)


def test_branches_with_different_dtypes_are_reported():
    with pytest.raises(OnnxExporterError, match="different dtypes"):
        oxport.convert(mixed_dtypes, (torch.ones(3),))


def test_loop_body_is_a_typed_subgraph_with_unique_names():
    proto = oxport.convert(nested, (torch.zeros(2), torch.tensor(3))).model_proto
    names: list[str] = []

    def collect(graph: onnx.GraphProto) -> None:
        names.extend(graph.input[i].name for i in range(len(graph.input)))
        for node in graph.node:
            names.extend(node.output)
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    body = attr.g
                    assert all(v.type.tensor_type.elem_type for v in [*body.input, *body.output])
                    collect(body)

    collect(proto.graph)
    assert len(names) == len(set(names))
