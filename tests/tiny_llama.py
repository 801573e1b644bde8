"""A tiny transformers Llama with its DynamicCache, exported by oxport and run in ONNX
Runtime against eager: what the target, precision and fusion tests share."""

from __future__ import annotations

import copy
import io
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

import oxport

transformers = pytest.importorskip("transformers")
FRONT_ENDS = pytest.mark.parametrize("dynamo", [False, True], ids=["trace", "dynamo"])
VOCAB, LAYERS, KV_HEADS, HEAD_DIM = 97, 2, 2, 16
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def llama() -> torch.nn.Module:
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=LAYERS, num_attention_heads=4,
        num_key_value_heads=KV_HEADS, vocab_size=VOCAB)).eval()


def inputs(past: int, seq: int, dtype: torch.dtype = torch.float32, batch: int = 1
           ) -> tuple[torch.Tensor, torch.Tensor, Any]:
    """input_ids, attention_mask and a DynamicCache of ``past`` random positions."""
    generator = torch.Generator().manual_seed(past * 10 + seq)
    cache = transformers.DynamicCache()
    for index in range(LAYERS):
        cache.update(*(torch.randn(batch, KV_HEADS, past, HEAD_DIM, generator=generator)
                       .to(dtype) for _ in "kv"), index)
    ids = torch.randint(0, VOCAB, (batch, seq), generator=generator)
    return ids, torch.ones(batch, past + seq, dtype=torch.long), cache


def names() -> list[str]:
    return ["input_ids", "attention_mask",
            *(f"cache.{i}.{kv}" for i in range(LAYERS) for kv in ("key", "value"))]


def export(model: torch.nn.Module, dynamo: bool = False,
           inputs_dtype: torch.dtype = torch.float32, **kwargs: Any
           ) -> tuple[bytes, oxport.ExportResult]:
    """The exported file (prefill of 3 after a past of 4, batch/sequence/past dynamic),
    its example cache in ``inputs_dtype``."""
    ids, mask, cache = inputs(4, 3, inputs_dtype, batch=2)
    axes = {n: ({0: "batch", 1: "seq"} if n == "input_ids" else
                {0: "batch", 1: "total"} if n == "attention_mask" else {0: "batch", 2: "past"})
            for n in names()}
    buffer = io.BytesIO()
    result = oxport.export(model, (ids, {"attention_mask": mask, "cache": cache}), buffer,
                           dynamo=dynamo, dynamic_axes=axes, **kwargs)
    return buffer.getvalue(), result


def float_boundary(data: bytes) -> bytes:
    """The model with bfloat16 inputs and outputs as float32 ones (casts added), since
    ONNX Runtime's Python API takes and gives no bfloat16 arrays."""
    model = onnx.load_from_string(data)
    graph, bf16 = model.graph, onnx.TensorProto.BFLOAT16
    casts = []
    for value in graph.input:
        if value.type.tensor_type.elem_type == bf16:
            inner = value.name + ".bf16"
            for node in graph.node:
                node.input[:] = [inner if i == value.name else i for i in node.input]
            casts.append(onnx.helper.make_node("Cast", [value.name], [inner], to=bf16))
            value.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    for value in graph.output:
        if value.type.tensor_type.elem_type == bf16:
            inner = value.name + ".bf16"
            for node in graph.node:
                node.output[:] = [inner if o == value.name else o for o in node.output]
            graph.node.append(onnx.helper.make_node("Cast", [inner], [value.name],
                                                    to=onnx.TensorProto.FLOAT))
            value.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    nodes = casts + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)
    return model.SerializeToString()


def run(data: bytes, past: int, seq: int, dtype: torch.dtype = torch.float32,
        optimized: bool = True) -> list[np.ndarray]:
    """ONNX Runtime's outputs (as float32) on the inputs of ``past`` and ``seq``; with
    ``optimized=False`` its graph optimizations are off (they rewrite a blocked
    DequantizeLinear + MatMul into MatMulNBits, which quantizes the activations too)."""
    if dtype == torch.bfloat16:
        data = float_boundary(data)
    options = ort.SessionOptions()
    if not optimized:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    feed_type = np.float16 if dtype == torch.float16 else np.float32
    ids, mask, cache = inputs(past, seq, dtype)
    feeds = {"input_ids": ids.numpy(), "attention_mask": mask.numpy()}
    for index, layer in enumerate(cache.layers):
        feeds[f"cache.{index}.key"] = layer.keys.float().numpy().astype(feed_type)
        feeds[f"cache.{index}.value"] = layer.values.float().numpy().astype(feed_type)
    wanted = {i.name for i in session.get_inputs()}
    return [o.astype(np.float32) for o in
            session.run(None, {k: v for k, v in feeds.items() if k in wanted})]


def eager(model: torch.nn.Module, past: int, seq: int, dtype: torch.dtype = torch.float32
          ) -> list[np.ndarray]:
    """Eager logits and presents in ``dtype`` (as float32)."""
    model = copy.deepcopy(model).to(dtype)
    ids, mask, cache = inputs(past, seq, dtype)
    with torch.no_grad():
        out = model(ids, attention_mask=mask, cache=cache)
    presents = [t for layer in out.cache.layers for t in (layer.keys, layer.values)]
    return [t.float().numpy() for t in (out.logits, *presents)]


def assert_matches_eager(data: bytes, model: torch.nn.Module,
                         dtype: torch.dtype = torch.float32, atol: float = 1e-4,
                         shapes: tuple[tuple[int, int], ...] = ((4, 3), (6, 1)),
                         optimized: bool = True) -> None:
    """ONNX Runtime's logits and presents match eager's at a prefill and a decode step."""
    for past, seq in shapes:
        got = run(data, past, seq, dtype, optimized)
        want = eager(model, past, seq, dtype)
        assert len(got) == len(want)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=0, atol=atol)


def op_types(data: bytes) -> list[tuple[str, str]]:
    return [(n.domain, n.op_type) for n in onnx.load_from_string(data).graph.node]
