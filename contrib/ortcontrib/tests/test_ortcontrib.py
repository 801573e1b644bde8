"""oxport-ortcontrib: every case of its symbolics through the shared runner, the
declining gelu, and the BiasGelu fusion."""

from __future__ import annotations

import onnxruntime as ort
import torch
import torch.nn.functional as F

import oxport
from oxport.testing import compare, op_tests

# One line gives the pack the runner the built-in packs use: export each case at the
# lowest opset its symbolic serves, the default and the newest ONNX Runtime runs, check it
# in full, run it in ONNX Runtime and compare with eager PyTorch.
test_ortcontrib_cases = op_tests("ortcontrib")


def nodes(model) -> list[tuple[str, str]]:
    return [(n.domain, n.op_type) for n in model.graph.node if n.op_type != "Constant"]


def run_ort(model, *inputs: torch.Tensor) -> list:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, {n: x.numpy() for n, x in zip(names, inputs)})


class Gelu(torch.nn.Module):
    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, x):
        return F.gelu(x, approximate=self.approximate)


def test_exact_gelu_is_com_microsoft_gelu():
    x = torch.randn(2, 5)
    model = oxport.convert(Gelu(), (x,), opset_version=17).model_proto
    assert nodes(model) == [("com.microsoft", "Gelu")]
    assert {o.domain: o.version for o in model.opset_import}["com.microsoft"] == 1
    compare(F.gelu(x), run_ort(model, x), rtol=1e-4, atol=1e-5)


def test_tanh_gelu_declines_to_the_standard_symbolic():
    x = torch.randn(2, 5)
    for opset in (17, 20):
        result = oxport.convert(Gelu("tanh"), (x,), opset_version=opset)
        model = result.model_proto
        assert all(domain == "" for domain, _ in nodes(model)), nodes(model)
        (gelu,) = [e for e in result.used if e.name == "aten::gelu"]
        assert gelu.provenance.distribution == "oxport"  # the standard pack's symbolic
        compare(F.gelu(x, approximate="tanh"), run_ort(model, x), rtol=1e-4, atol=1e-5)


def test_double_gelu_declines_too():
    result = oxport.convert(Gelu(), (torch.randn(3, dtype=torch.float64),), opset_version=17)
    assert ("", "Erf") in nodes(result.model_proto)


class LinearGelu(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(6, 8)

    def forward(self, x):
        return F.gelu(self.linear(x))


def test_bias_gelu_fusion():
    x = torch.randn(2, 3, 6)
    model = LinearGelu().eval()
    onnx_model = oxport.convert(model, (x,), opset_version=17).model_proto
    assert ("com.microsoft", "BiasGelu") in nodes(onnx_model)
    assert ("", "Add") not in nodes(onnx_model)
    compare(model(x), run_ort(onnx_model, x), rtol=1e-4, atol=1e-5)
