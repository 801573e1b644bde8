"""Writes the walker carries to later uses: out= overloads (``torch.add(a, b, out=c)``: the
symbolic gets the op's own arguments, the result goes to ``out``), and in-place ops chained
on a view (the result of ``v.zero_()`` still views ``v``'s base)."""

from __future__ import annotations

import torch

import oxport
from oxport import testing


def _check(model, *inputs: torch.Tensor, opset: int = 17) -> None:
    import onnxruntime as ort

    result = oxport.convert(testing.as_module(model), inputs, opset_version=opset)
    session = ort.InferenceSession(result.model_proto.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    actual = session.run(None, {i.name: x.numpy() for i, x in zip(session.get_inputs(), inputs)})
    testing.compare(model(*inputs), actual, rtol=1e-5, atol=1e-6)


def test_out_tensor_and_out_view() -> None:
    def model(a, b):
        c = torch.empty(3, 4)
        torch.add(a, b, out=c)
        d = torch.zeros(2, 3, 4)
        torch.mul(a, 2, out=d[1])  # reaches d through the select view
        return c * 2, d

    _check(model, torch.randn(3, 4), torch.randn(3, 4))


def test_in_place_ops_chained_on_a_view() -> None:
    def model(x):
        s = torch.zeros_like(x)
        v = s.select(1, 0)
        v.zero_()
        v.add_(x.select(1, 0))  # the trace applies this to zero_'s result
        v.add_(x.select(1, 1))
        s[:, 2].mul_(0).add_(x[:, 2]).mul_(3)
        return s * 1

    _check(model, torch.randn(2, 3, 4))


def test_an_out_overload_with_two_outputs() -> None:
    def model(x):
        values, indices = torch.empty(3), torch.empty(3, dtype=torch.long)
        torch.max(x, 1, out=(values, indices))
        return values + 1, indices

    _check(model, torch.randn(3, 5))


def test_cross_map_lrn2d() -> None:
    """Its autograd Function, inlined, writes with pow(..., out=) and into views."""
    torch.manual_seed(0)
    _check(torch.nn.CrossMapLRN2d(3, alpha=1e-2, beta=0.75, k=1.0), torch.randn(1, 5, 4, 4),
           opset=13)
