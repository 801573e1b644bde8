"""oxport's built-in runtime targets, registered like a third party's
(``oxport_register_targets``):

* ``onnx`` (the default): the standard domain only; at opset 23+ the hand-written RMSNorm
  as ``RMSNormalization``, attention with its KV cache as ``Attention`` (past and present
  inside), the rotary pattern as ``RotaryEmbedding``; ``quantize`` as blocked
  ``DequantizeLinear`` (opset 21+).
* ``ort``: ONNX Runtime's fused ops (``com.microsoft::SkipSimplifiedLayerNormalization``,
  ``SkipLayerNormalization``, ``GroupQueryAttention`` with the rotary embedding inside,
  ``MultiHeadAttention``, ``RotaryEmbedding``, ``BiasGelu``, ``FastGelu``, ``MatMulNBits``),
  at opset 23 unless told (``RMSNormalization`` for a norm of no residual sum);
  ``ort==X.Y`` caps the opset and IR version at what that release loads, plain ``ort`` at
  what the installed ONNX Runtime loads.
"""

from __future__ import annotations

from oxport import hookimpl
from oxport.opsets.attention import scaled_dot_product_attention
from oxport.plugin_manager import importlib_metadata
from oxport.plugins.targets.attention import (
    fuse_attention_with_cache,
    fuse_group_query_attention,
    fuse_rotary_embedding,
)
from oxport.plugins.targets.gelu import fuse_gelu
from oxport.plugins.targets.mha import fuse_multi_head_attention
from oxport.plugins.targets.norms import fuse_rms_norm, fuse_skip_layer_norm
from oxport.plugins.targets.precision import compute_bfloat16_in_float32
from oxport.plugins.targets.quantize import quantize_weights
from oxport.plugins.targets.rotary import fuse_rotary_embedding_ort
from oxport.registry import Registrar
from oxport.targets import Target

#: ONNX Runtime release -> (newest ai.onnx opset, newest IR version) it loads, from its
#: compatibility table (docs/targets.md).
ORT_VERSIONS = {
    "1.10": (15, 8), "1.11": (16, 8), "1.12": (17, 8), "1.13": (17, 8), "1.14": (18, 8),
    "1.15": (19, 9), "1.16": (19, 9), "1.17": (20, 9), "1.18": (21, 10), "1.19": (21, 10),
    "1.20": (21, 10), "1.21": (22, 10), "1.22": (22, 10), "1.23": (23, 11),
}

def installed_onnxruntime() -> str | None:
    """The version of the installed ONNX Runtime package, whichever build it is."""
    for name in ("onnxruntime", "onnxruntime-gpu", "onnxruntime-directml",
                 "onnxruntime-openvino", "onnxruntime-qnn"):
        try:
            return importlib_metadata.version(name)
        except importlib_metadata.PackageNotFoundError:
            continue
    return None


ONNX = Target(
    "onnx", "standard ONNX; at opset 23 RMSNormalization, Attention with its KV cache, "
    "RotaryEmbedding; int4/int8 weights as blocked DequantizeLinear (opset 21+)",
    passes=[("onnx.rms-norm", fuse_rms_norm), ("onnx.attention", fuse_attention_with_cache),
            ("onnx.rotary", fuse_rotary_embedding), ("onnx.quantize", quantize_weights),
            ("onnx.bf16-on-cpu", compute_bfloat16_in_float32)])
ORT = Target(
    "ort", "ONNX Runtime: Skip(Simplified)LayerNormalization, GroupQueryAttention (rotary "
    "inside), MultiHeadAttention, RotaryEmbedding, BiasGelu/FastGelu, MatMulNBits; "
    "'ort==X.Y' caps the opset and IR version",
    passes=[("ort.rms-norm", fuse_rms_norm), ("ort.layer-norm", fuse_skip_layer_norm),
            ("ort.attention", fuse_group_query_attention),
            ("ort.rotary", fuse_rotary_embedding_ort),
            ("ort.multi-head-attention", fuse_multi_head_attention), ("ort.gelu", fuse_gelu),
            ("ort.quantize", quantize_weights),
            ("ort.bf16-on-cpu", compute_bfloat16_in_float32)],
    domains={"com.microsoft": 1}, versions=ORT_VERSIONS, default_opset=23,
    installed=lambda: installed_onnxruntime(),  # looked up when asked (tests replace it)
    # decomposed at every opset (not opset 23's Attention), for GroupQueryAttention to fuse
    symbolics=[("aten::scaled_dot_product_attention", scaled_dot_product_attention, 23)])


@hookimpl
def oxport_register_targets(registry: Registrar) -> None:
    registry.register_target("onnx", ONNX)
    registry.register_target("ort", ORT)
