"""Classic models through the core path: the seed's AlexNet example, an MLP, ResNets.

Each export passes the full ONNX checker and ONNX Runtime matches eager PyTorch
(rtol 1e-3, atol 1e-4); the MLP and the ResNets are also exported with a dynamic
batch axis and run at a second batch size.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

import oxport
from tests.models.alexnet import alexnet
from tests.models.mlp import MLP
from tests.models.resnet import resnet18, resnet50

TOL = {"rtol": 1e-3, "atol": 1e-4}


def _check_and_run(path: str, *inputs: torch.Tensor) -> list[np.ndarray]:
    onnx.checker.check_model(path, full_check=True)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return session.run(None, {i.name: x.numpy() for i, x in zip(session.get_inputs(), inputs)})


def _eager(model: torch.nn.Module, x: torch.Tensor) -> np.ndarray:
    with torch.no_grad():
        return model(x).numpy()


@pytest.fixture(scope="module")
def alexnet_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return alexnet().eval()


def test_alexnet_seed_example(tmp_path, capsys, alexnet_model):
    """The seed's example: named input and 16 ``learned_%d`` parameters, verbose=True."""
    model = alexnet_model
    dummy_input = torch.randn(1, 3, 224, 224)
    input_names = ["actual_input_1"] + ["learned_%d" % i for i in range(16)]
    output_names = ["output1"]
    path = str(tmp_path / "alexnet.onnx")
    oxport.export(model, dummy_input, path, verbose=True, input_names=input_names,
                  output_names=output_names)

    printed = capsys.readouterr().out
    assert printed.startswith("graph(%actual_input_1 : Float(1, 3, 224, 224),\n"
                              "      %learned_0 : Float(64, 3, 11, 11),\n"
                              "      %learned_1 : Float(64),")
    assert "%learned_15 : Float(1000)) {" in printed
    assert ("%actual_input_1, %learned_0, %learned_1), "
            "scope: AlexNet/Sequential[features]/Conv2d[0]") in printed
    assert "onnx::Relu" in printed and "scope: AlexNet/Sequential[features]/ReLU[1]" in printed
    assert "%output1 : Float(1, 1000) = onnx::Gemm" in printed
    assert "scope: AlexNet/Sequential[classifier]/Linear[6]" in printed
    assert printed.rstrip().endswith("return (%output1)\n}")

    proto = onnx.load(path, load_external_data=False)
    assert [i.name for i in proto.graph.input] == ["actual_input_1"]
    assert sorted(t.name for t in proto.graph.initializer) == sorted(input_names[1:])
    assert [o.name for o in proto.graph.output] == ["output1"]
    assert all("alexnet.py" in n.doc_string for n in proto.graph.node
               if n.op_type in ("Conv", "Gemm"))
    (got,) = _check_and_run(path, dummy_input)
    np.testing.assert_allclose(got, _eager(model, dummy_input), **TOL)


def _export_static_and_dynamic(tmp_path, model, x, x2):
    static = str(tmp_path / "static.onnx")
    oxport.export(model, x, static)
    (got,) = _check_and_run(static, x)
    np.testing.assert_allclose(got, _eager(model, x), **TOL)

    dynamic = str(tmp_path / "dynamic.onnx")
    oxport.export(model, x, dynamic, input_names=["x"], output_names=["y"],
                  dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    proto = onnx.load(dynamic)
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert proto.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    (got,) = _check_and_run(dynamic, x2)
    assert got.shape[0] == x2.shape[0] != x.shape[0]
    np.testing.assert_allclose(got, _eager(model, x2), **TOL)


def test_mlp(tmp_path):
    torch.manual_seed(0)
    model = MLP((32, 64, 64, 10)).eval()
    _export_static_and_dynamic(tmp_path, model, torch.randn(4, 32), torch.randn(7, 32))


def test_resnet18(tmp_path):
    torch.manual_seed(0)
    model = resnet18().eval()
    _randomize_batch_norm(model)
    _export_static_and_dynamic(tmp_path, model, torch.randn(1, 3, 64, 64),
                               torch.randn(3, 3, 64, 64))


def test_resnet50_bottleneck(tmp_path):
    torch.manual_seed(0)
    model = resnet50(num_classes=10, width=8).eval()
    _randomize_batch_norm(model)
    _export_static_and_dynamic(tmp_path, model, torch.randn(1, 3, 32, 32),
                               torch.randn(2, 3, 32, 32))


def _randomize_batch_norm(model: torch.nn.Module) -> None:
    """Non-trivial running statistics, so BatchNormalization is really checked."""
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.uniform_(-0.1, 0.1)
            module.running_var.uniform_(0.5, 1.5)
            module.weight.data.uniform_(0.5, 1.5)
            module.bias.data.uniform_(-0.1, 0.1)


@pytest.mark.parametrize("builder, blocks", [(resnet18, [2, 2, 2, 2]), (resnet50, [3, 4, 6, 3])])
def test_resnet_builders_follow_torchvision(builder, blocks):
    model = builder()
    assert [len(getattr(model, f"layer{i}")) for i in range(1, 5)] == blocks
    expected = {resnet18: 11_689_512, resnet50: 25_557_032}[builder]  # torchvision's counts
    assert sum(p.numel() for p in model.parameters()) == expected


def test_alexnet_follows_torchvision(alexnet_model):
    assert sum(p.numel() for p in alexnet_model.parameters()) == 61_100_840
    assert len(list(alexnet_model.parameters())) == 16
