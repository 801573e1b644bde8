"""``dtype=`` (fp16, bf16) and ``quantize=`` (int4, int8 weight-only) exports of a tiny
Llama with its KV cache: ONNX Runtime against eager in that dtype, and against eager with
the same dequantized weights; the files shrink as they should."""

from __future__ import annotations

import copy

import numpy as np
import onnx
import pytest
import torch

import oxport
from oxport.errors import InvalidExportArgumentError
from oxport.plugins.targets.quantize import pack_nibbles, quantize_blocks
from tests import tiny_llama
from tests.tiny_llama import DTYPES, FRONT_ENDS


@pytest.fixture(scope="module")
def model():
    return tiny_llama.llama()


def _size(data: bytes) -> int:
    """The file's size without the rotary tables the ort target adds (float32 always)."""
    tables = [i for i in onnx.load_from_string(data).graph.initializer
              if i.name.startswith(("cos_cache", "sin_cache"))]
    return len(data) - sum(len(t.raw_data) for t in tables)


@pytest.fixture(scope="module")
def fp32_size(model):
    return _size(tiny_llama.export(model)[0])


@FRONT_ENDS
@pytest.mark.parametrize("target", ["onnx", "ort"])
@pytest.mark.parametrize(("dtype", "atol"), [("fp16", 2e-3), ("bf16", 2e-2)])
def test_a_low_precision_export_matches_eager_in_that_dtype(model, fp32_size, dynamo, target,
                                                            dtype, atol):
    data, _ = tiny_llama.export(model, dynamo, DTYPES[dtype], target=target, dtype=dtype)
    assert _size(data) < 0.6 * fp32_size
    tiny_llama.assert_matches_eager(data, model, DTYPES[dtype], atol=atol)


def test_the_callers_model_stays_float32(model):
    before = copy.deepcopy(model.state_dict())
    tiny_llama.export(model, dtype="fp16")
    assert all(v.dtype == torch.float32 and torch.equal(v, before[k])
               for k, v in model.state_dict().items())


def _dequantized(model: torch.nn.Module, bits: int, block: int, lm_head: bool = True):
    """``model`` with each Linear's weight replaced by its quantized-then-dequantized
    value, as the export quantizes it."""
    model = copy.deepcopy(model)
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and (lm_head or name != "lm_head"):
            weight = module.weight.detach().numpy()
            codes, scale, zero = quantize_blocks(weight, bits, block)
            values = (codes.astype(np.float32) - zero[..., None]) * scale[..., None]
            module.weight.data = torch.from_numpy(
                values.reshape(weight.shape[0], -1)[:, :weight.shape[1]].copy())
    return model


@pytest.mark.parametrize(("target", "opset"), [("ort", None), ("onnx", 21)])
@pytest.mark.parametrize(("quantize", "bits", "block"), [("int4", 4, 32), ("int8", 8, 16)])
def test_weight_only_quantization_matches_the_dequantized_weights(model, fp32_size, target,
                                                                  opset, quantize, bits,
                                                                  block):
    data, _ = tiny_llama.export(model, target=target, opset_version=opset,
                                     quantize=quantize, quantize_block_size=block)
    ops = tiny_llama.op_types(data)
    linears = tiny_llama.LAYERS * 7 + 1
    if target == "ort":  # the query, key and value projections packed into one
        assert ops.count(("com.microsoft", "MatMulNBits")) == linears - 2 * tiny_llama.LAYERS
    else:
        assert ops.count(("", "DequantizeLinear")) == linears
    reference = _dequantized(model, bits, block)
    if target == "onnx":  # the file's own semantics, before ONNX Runtime rewrites it
        tiny_llama.assert_matches_eager(data, reference, optimized=False)
    # int4 MatMulNBits quantizes its activations to int8 too (accuracy level 4, as ONNX
    # Runtime also makes of a blocked DequantizeLinear + MatMul): a looser bound.
    exact = (target, bits) == ("ort", 8)
    tiny_llama.assert_matches_eager(data, reference, atol=1e-4 if exact else 5e-3)
    assert _size(data) < (0.3 if bits == 4 else 0.45) * fp32_size


def test_the_head_can_stay_float_and_embeddings_can_be_quantized(model):
    data, _ = tiny_llama.export(model, target="onnx", opset_version=21, quantize={
        "format": "int8", "block_size": 16, "lm_head": False, "embeddings": True})
    ops = tiny_llama.op_types(data)
    assert ops.count(("", "DequantizeLinear")) == tiny_llama.LAYERS * 7 + 1  # + embeddings
    reference = _dequantized(model, 8, 16, lm_head=False)
    table = reference.model.embed_tokens.weight.detach().numpy()
    codes, scale, zero = quantize_blocks(table, 8, 16)
    values = ((codes.astype(np.float32) - zero[..., None]) * scale[..., None])
    reference.model.embed_tokens.weight.data = torch.from_numpy(
        values.reshape(table.shape[0], -1)[:, :table.shape[1]].copy())
    tiny_llama.assert_matches_eager(data, reference, optimized=False)


def test_quantize_as_a_dict_is_checked():
    with pytest.raises(InvalidExportArgumentError, match=r"unknown: bits"):
        oxport.export(torch.nn.Linear(2, 2), (torch.randn(2),), None,
                      quantize={"format": "int4", "bits": 4})


def test_quantized_dequantizelinear_needs_opset_21(model):
    with pytest.raises(InvalidExportArgumentError, match=r"blocked DequantizeLinear, which "
                       r"needs opset 21 \(the export is at 20\)"):
        tiny_llama.export(model, target="onnx", quantize="int4")


def test_bf16_with_quantize_is_refused(model):
    with pytest.raises(InvalidExportArgumentError, match=r"dtype='bf16' with quantize="):
        tiny_llama.export(model, False, torch.bfloat16, target="ort", dtype="bf16", quantize="int4")


def test_nibbles_pack_low_first():
    codes = np.array([[1, 2, 3, 15, 7]], np.uint8)
    assert pack_nibbles(codes).tolist() == [[0x21, 0xF3, 0x07]]


def test_blocks_quantize_within_half_a_step():
    weight = np.random.default_rng(0).standard_normal((3, 40)).astype(np.float32)
    codes, scale, zero = quantize_blocks(weight, 4, 16)
    assert codes.shape == (3, 3, 16) and codes.max() <= 15
    values = ((codes.astype(np.float32) - zero[..., None]) * scale[..., None]).reshape(3, -1)
    assert np.all(np.abs(values[:, :40] - weight) <= scale.repeat(16, axis=1)[:, :40] / 2 + 1e-6)
