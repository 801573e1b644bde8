"""Real ``transformers`` model code, from small configs with random weights (no downloads).

BERT, GPT-2, T5 (encoder-decoder, with ``decoder_input_ids``), a LLaMA decoder
(grouped-query attention, rotary embeddings, RMSNorm), ViT and Whisper at opsets 13, 17, 20
and 26; Mixtral- and DeepSeek-V3-style mixture-of-experts decoders (expert routing: sort,
histc, grouped matmuls), DeepSeek-V2 (rotary embeddings as complex products: polar,
view_as_complex, view_as_real), FNet (Fourier mixing: fft_fftn, real) and Qwen3-Next
(gated delta-rule linear attention: linalg_solve_triangular) at 17 and 20; TAPAS question
answering (segment reductions: scatter_reduce without self) and MobileViTV2 (fold: col2im)
at 18 and 20; WavTokenizer (a Vocos decoder: polar, fft_irfft, col2im), VideoPrism and
DINOv2 with registers (position embeddings resized with antialias: _upsample_bilinear2d_aa,
_upsample_bicubic2d_aa) at 18 and 20; GIT (its causal mask OR-ed with a blockwise one and
AND-ed with the padding, on bool tensors: __or__, __and__) at 17 and 20;
Deformable DETR (multi-scale deformable attention: grid_sampler) at 16 and 20; SEW (a conv
feature extractor over a dynamic number of samples), ProphetNet (n-gram streams chunked
along a dynamic axis) and SEW-D (an autograd Function whose static
symbolic calls torch.onnx's own symbolics; dynamic batch only) at 13 and 17. Each is
exported with a dynamic batch and sequence axis, checked by the full ONNX checker and run in
ONNX Runtime at the traced sizes and at a second batch and sequence length, against eager
PyTorch (rtol 1e-3, atol 1e-4). Attention masks are inputs, with padding in the first row;
``return_dict=False`` is passed as a keyword. The ops a model is here for (``OPS``) must be
among those its export converted.
"""

from __future__ import annotations

import dataclasses
import functools
import io
from collections.abc import Callable

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

import oxport

transformers = pytest.importorskip(
    "transformers", reason="transformers is not installed (pip install -e .[test])")

OPSETS = (13, 17, 20, 26)
SIZES = ((2, 7), (3, 11))  # (batch, sequence): traced, then the second size
VOCAB = 99


def _tokens(batch: int, seq: int) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, seq))


def _mask(batch: int, seq: int) -> torch.Tensor:
    """All ones but the first row's last two positions (padding)."""
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[0, -2:] = 0
    return mask


@dataclasses.dataclass(frozen=True)
class Spec:
    build: Callable[[], torch.nn.Module]
    #: (batch, seq) -> keyword inputs, in the order they become graph inputs
    inputs: Callable[[int, int], dict[str, torch.Tensor]]
    #: input and output names (inputs first) -> dynamic axes
    axes: dict[str, dict[int, str]]
    rtol: float = 1e-3
    atol: float = 1e-4
    opsets: tuple[int, ...] = OPSETS


_BS = {0: "batch", 1: "seq"}


def _bert() -> torch.nn.Module:
    return transformers.BertModel(transformers.BertConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
        vocab_size=VOCAB, max_position_embeddings=64))


def _gpt2() -> torch.nn.Module:
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(
        n_embd=32, n_layer=2, n_head=2, vocab_size=VOCAB, n_positions=64, use_cache=False,
        bos_token_id=0, eos_token_id=0))


def _t5() -> torch.nn.Module:
    return transformers.T5ForConditionalGeneration(transformers.T5Config(
        d_model=32, d_kv=8, d_ff=37, num_layers=2, num_decoder_layers=2, num_heads=4,
        vocab_size=VOCAB, use_cache=False, decoder_start_token_id=0))


def _llama() -> torch.nn.Module:
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=37, vocab_size=VOCAB, max_position_embeddings=64, use_cache=False,
        bos_token_id=0, eos_token_id=0, pad_token_id=0))


def _vit() -> torch.nn.Module:
    return transformers.ViTForImageClassification(transformers.ViTConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
        image_size=32, patch_size=8, num_labels=10))


def _whisper() -> torch.nn.Module:
    return transformers.WhisperForConditionalGeneration(transformers.WhisperConfig(
        d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=37, decoder_ffn_dim=37, vocab_size=VOCAB,
        num_mel_bins=8, max_source_positions=16, max_target_positions=32, use_cache=False,
        pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1))


# transformers routes experts through torch._grouped_mm, whose CPU kernel needs rows of a
# multiple of 16 bytes: hidden and expert sizes are multiples of 4 floats.
def _mixtral() -> torch.nn.Module:
    return transformers.MixtralForCausalLM(transformers.MixtralConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=48, num_local_experts=4, num_experts_per_tok=2, vocab_size=VOCAB,
        max_position_embeddings=64, use_cache=False, bos_token_id=0, eos_token_id=0,
        pad_token_id=0))


def _deepseek(version: str = "V3") -> torch.nn.Module:
    """DeepSeek-V3 (or V2): multi-head latent attention, grouped top-k routing over 4 experts
    with a shared expert; the first layer dense, the second a mixture of experts."""
    model = getattr(transformers, f"Deepseek{version}ForCausalLM")
    config = getattr(transformers, f"Deepseek{version}Config")
    return model(config(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
        intermediate_size=48, moe_intermediate_size=16, n_routed_experts=4,
        num_experts_per_tok=2, n_group=2, topk_group=1, n_shared_experts=1,
        first_k_dense_replace=1, q_lora_rank=16, kv_lora_rank=16, qk_rope_head_dim=8,
        qk_nope_head_dim=8, v_head_dim=8, vocab_size=VOCAB, max_position_embeddings=64,
        use_cache=False, bos_token_id=0, eos_token_id=0, pad_token_id=0))


def _fnet() -> torch.nn.Module:
    return transformers.FNetModel(transformers.FNetConfig(
        hidden_size=32, num_hidden_layers=2, intermediate_size=37, vocab_size=VOCAB,
        max_position_embeddings=64, use_tpu_fourier_optimizations=False))


def _qwen3_next() -> torch.nn.Module:
    """One gated delta-rule (linear attention) layer and one full attention layer, over a
    mixture of 4 experts."""
    return transformers.Qwen3NextForCausalLM(transformers.Qwen3NextConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        head_dim=8, intermediate_size=48, moe_intermediate_size=16,
        shared_expert_intermediate_size=16, num_experts=4, num_experts_per_tok=2,
        linear_num_value_heads=4, linear_num_key_heads=2, linear_key_head_dim=8,
        linear_value_head_dim=8, linear_conv_kernel_dim=4,
        layer_types=["linear_attention", "full_attention"], vocab_size=VOCAB,
        max_position_embeddings=64, use_cache=False, bos_token_id=0, eos_token_id=0,
        pad_token_id=0))


def _mobilevitv2() -> torch.nn.Module:
    """Its initialization leaves the output at zero: the weights are perturbed."""
    model = transformers.MobileViTV2Model(transformers.MobileViTV2Config(
        image_size=64, patch_size=2, width_multiplier=0.25, n_attn_blocks=[1, 1, 1],
        base_attn_unit_dims=[16, 24, 32]))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.1)
    return model


def _sew_d() -> torch.nn.Module:
    """Its attention softmax is an autograd Function whose static symbolic calls torch.onnx's
    own masked_fill and softmax (prim::PythonOp)."""
    return transformers.SEWDModel(transformers.SEWDConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
        conv_dim=(8, 8), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=4,
        num_conv_pos_embedding_groups=2, squeeze_factor=2, position_buckets=8,
        max_position_embeddings=64))


def _sew() -> torch.nn.Module:
    return transformers.SEWModel(transformers.SEWConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
        conv_dim=(8, 8), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=4,
        num_conv_pos_embedding_groups=2, squeeze_factor=2))


def _prophetnet() -> torch.nn.Module:
    """Its decoder chunks the n-gram streams (aten::chunk over a dynamic axis)."""
    return transformers.ProphetNetModel(transformers.ProphetNetConfig(
        vocab_size=VOCAB, hidden_size=32, encoder_ffn_dim=37, decoder_ffn_dim=37,
        num_encoder_layers=2, num_decoder_layers=2, num_encoder_attention_heads=2,
        num_decoder_attention_heads=2, max_position_embeddings=64, ngram=2, num_buckets=8,
        relative_max_distance=16))


def _tapas() -> torch.nn.Module:
    return transformers.TapasForQuestionAnswering(transformers.TapasConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
        vocab_size=VOCAB, max_position_embeddings=64))


def _table_inputs(batch: int, seq: int) -> dict[str, torch.Tensor]:
    """A question of 3 tokens, then a table of 2 columns, a cell a token, row by row."""
    types = torch.zeros(batch, seq, 7, dtype=torch.long)
    cells = torch.arange(seq - 3)
    types[:, 3:, 0] = 1  # segment: table
    types[:, 3:, 1] = cells % 2 + 1  # column
    types[:, 3:, 2] = cells // 2 + 1  # row
    return {"input_ids": _tokens(batch, seq), "attention_mask": _mask(batch, seq),
            "token_type_ids": types}


def _deformable_detr() -> torch.nn.Module:
    """A 3-stage ResNet backbone (no timm, no download) under one encoder and two decoder
    layers."""
    backbone = transformers.ResNetConfig(
        embedding_size=16, hidden_sizes=[16, 32, 64, 64], depths=[1, 1, 1, 1],
        out_features=["stage2", "stage3", "stage4"])
    return transformers.DeformableDetrForObjectDetection(transformers.DeformableDetrConfig(
        use_timm_backbone=False, backbone_config=backbone, use_pretrained_backbone=False,
        d_model=32, encoder_ffn_dim=37, decoder_ffn_dim=37, encoder_layers=1,
        decoder_layers=2, num_queries=10, num_labels=3, encoder_attention_heads=2,
        decoder_attention_heads=2, num_feature_levels=3, encoder_n_points=2,
        decoder_n_points=2))


def _wavtokenizer() -> torch.nn.Module:
    return transformers.WavTokenizerModel(transformers.WavTokenizerConfig(
        num_filters=4, upsampling_ratios=[2, 2], hidden_size=16, codebook_dim=16,
        codebook_size=32, decoder_hidden_size=32, decoder_intermediate_size=37,
        decoder_num_layers=1, decoder_attention_num_groups=4, num_lstm_layers=1))


def _dinov2_with_registers() -> torch.nn.Module:
    return transformers.Dinov2WithRegistersModel(transformers.Dinov2WithRegistersConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, mlp_ratio=1, image_size=32,
        patch_size=8, num_register_tokens=2))


def _git() -> torch.nn.Module:
    """Text only (no pixel values): the image-token group ids are all -1."""
    return transformers.GitModel(transformers.GitConfig(
        vision_config={"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
                       "intermediate_size": 17, "image_size": 16, "patch_size": 8},
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
        vocab_size=VOCAB, max_position_embeddings=64, use_cache=False, bos_token_id=0,
        eos_token_id=0, pad_token_id=0))


def _videoprism() -> torch.nn.Module:
    return transformers.VideoPrismVisionModel(transformers.VideoPrismVisionConfig(
        image_size=32, num_frames=2, tubelet_size=[1, 8, 8], hidden_size=32,
        num_attention_heads=2, intermediate_size=37, num_spatial_layers=1,
        num_temporal_layers=1, num_auxiliary_layers=1))


_DECODER_AXES = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
                 "logits": {0: "batch", 1: "seq"}}


def _decoder_inputs(batch: int, seq: int) -> dict[str, torch.Tensor]:
    return {"input_ids": _tokens(batch, seq), "attention_mask": _mask(batch, seq)}


SPECS: dict[str, Spec] = {
    "bert": Spec(_bert, lambda b, s: {
        "input_ids": _tokens(b, s), "attention_mask": _mask(b, s),
        "token_type_ids": (torch.arange(s) >= s // 2).long().expand(b, s)},
        {"input_ids": _BS, "attention_mask": _BS, "token_type_ids": _BS,
         "last_hidden_state": _BS, "pooler_output": {0: "batch"}}),
    "gpt2": Spec(_gpt2, lambda b, s: {"input_ids": _tokens(b, s), "attention_mask": _mask(b, s)},
                 {"input_ids": _BS, "attention_mask": _BS, "logits": _BS}),
    "t5": Spec(_t5, lambda b, s: {
        "input_ids": _tokens(b, s), "attention_mask": _mask(b, s),
        "decoder_input_ids": _tokens(b, s - 2)},
        {"input_ids": _BS, "attention_mask": _BS,
         "decoder_input_ids": {0: "batch", 1: "target"}, "logits": {0: "batch", 1: "target"},
         "encoder_last_hidden_state": _BS}),
    "llama": Spec(_llama, lambda b, s: {"input_ids": _tokens(b, s),
                                        "attention_mask": _mask(b, s)},
                  {"input_ids": _BS, "attention_mask": _BS, "logits": _BS}),
    # The sequence of a ViT is its patches: images of 32x32 and 48x48 (16 and 36 patches),
    # with interpolate_pos_encoding=True.
    "vit": Spec(_vit, lambda b, s: {"pixel_values": torch.randn(b, 3, 32 + 16 * (s > 7),
                                                                32 + 16 * (s > 7))},
                {"pixel_values": {0: "batch", 2: "height", 3: "width"},
                 "logits": {0: "batch"}}),
    # Whisper's encoder takes a fixed 2 * max_source_positions frames; the decoder's tokens
    # are the sequence axis.
    "whisper": Spec(_whisper, lambda b, s: {"input_features": torch.randn(b, 8, 32),
                                            "decoder_input_ids": _tokens(b, s)},
                    {"input_features": {0: "batch"}, "decoder_input_ids": _BS,
                     "logits": _BS, "encoder_last_hidden_state": {0: "batch"}}),
    "mixtral": Spec(_mixtral, _decoder_inputs, _DECODER_AXES, opsets=(17, 20)),
    "deepseek_v3": Spec(_deepseek, _decoder_inputs, _DECODER_AXES, opsets=(17, 20)),
    "deepseek_v2": Spec(functools.partial(_deepseek, "V2"), _decoder_inputs, _DECODER_AXES,
                        opsets=(17, 20)),
    "qwen3_next": Spec(_qwen3_next, _decoder_inputs, _DECODER_AXES, opsets=(17, 20)),
    "prophetnet": Spec(_prophetnet, lambda b, s: {
        "input_ids": _tokens(b, s), "decoder_input_ids": _tokens(b, s - 2)},
        {"input_ids": _BS, "decoder_input_ids": {0: "batch", 1: "target"},
         "last_hidden_state": {0: "batch", 1: "target"},
         "last_hidden_state_ngram": {0: "batch", 1: "ngram_target"},
         "encoder_last_hidden_state": _BS}, opsets=(13, 17)),
    "sew": Spec(_sew, lambda b, s: {"input_values": torch.randn(b, 300 + 20 * s)},
                {"input_values": {0: "batch", 1: "samples"},
                 "last_hidden_state": {0: "batch", 1: "frames"}}, opsets=(13, 17)),
    # Dynamic batch only: the conv feature extractor's output length is traced as a constant.
    "sew_d": Spec(_sew_d, lambda b, s: {"input_values": torch.randn(b, 400)},
                  {"input_values": {0: "batch"}, "last_hidden_state": {0: "batch"}},
                  opsets=(13, 17)),
    # Col2Im (opset 18) folds the patches back at the sizes of the traced image: the batch
    # is the dynamic axis.
    "mobilevitv2": Spec(_mobilevitv2, lambda b, s: {"pixel_values": torch.randn(b, 3, 64, 64)},
                        {"pixel_values": {0: "batch"}, "last_hidden_state": {0: "batch"},
                         "pooler_output": {0: "batch"}}, opsets=(18, 20)),
    "tapas": Spec(_tapas, _table_inputs, {"input_ids": _BS, "attention_mask": _BS,
                                          "token_type_ids": _BS, "logits": _BS},
                  opsets=(18, 20)),  # its segment min and max: ScatterElements min/max (18)
    # The feature maps' sizes are Python ints in its code (traced as constants, by
    # torch.onnx too): the images keep their size, the batch is the dynamic axis.
    "deformable_detr": Spec(
        _deformable_detr, lambda b, s: {"pixel_values": torch.randn(b, 3, 64, 64),
                                        "pixel_mask": torch.ones(b, 64, 64, dtype=torch.long)},
        {name: {0: "batch"} for name in (
            "pixel_values", "pixel_mask", "logits", "pred_boxes", "last_hidden_state",
            "encoder_last_hidden_state", "init_reference_points",
            "intermediate_hidden_states", "intermediate_reference_points")},
        opsets=(16, 20)),
    # Audio of 400 and 560 samples (the sequence axis scaled by 40): 100 and 140 codes.
    "wavtokenizer": Spec(
        _wavtokenizer, lambda b, s: {"input_values": torch.randn(b, 1, 40 * (s + 3))},
        {"input_values": {0: "batch", 2: "samples"}, "audio_values": {0: "batch", 2: "samples"},
         "audio_codes": {0: "batch", 2: "frames"}}, opsets=(18, 20)),
    # Two frames of 32x32 and 48x48 pixels (16 and 36 patches each).
    "videoprism": Spec(
        _videoprism, lambda b, s: {"pixel_values_videos": torch.randn(
            b, 2, 3, 32 + 16 * (s > 7), 32 + 16 * (s > 7))},
        {"pixel_values_videos": {0: "batch", 3: "height", 4: "width"},
         "last_hidden_state": {0: "batch", 1: "tokens"},
         "spatial_hidden_state": {0: "batch_x_patches"},
         "temporal_hidden_state": {0: "batch_x_frames", 1: "patches"}}, opsets=(18, 20)),
    # Images of 32x32 and 48x48 (16 and 36 patches): under tracing the position embeddings
    # are always resized.
    "dinov2_with_registers": Spec(
        _dinov2_with_registers, lambda b, s: {"pixel_values": torch.randn(
            b, 3, 32 + 16 * (s > 7), 32 + 16 * (s > 7))},
        {"pixel_values": {0: "batch", 2: "height", 3: "width"},
         "last_hidden_state": {0: "batch", 1: "tokens"}, "pooler_output": {0: "batch"}},
        opsets=(18, 20)),
    "git": Spec(_git, _decoder_inputs, {"input_ids": _BS, "attention_mask": _BS,
                                        "last_hidden_state": _BS}, opsets=(17, 20)),
    "fnet": Spec(_fnet, lambda b, s: {"input_ids": _tokens(b, s)},
                 {"input_ids": _BS, "last_hidden_state": _BS, "pooler_output": {0: "batch"}},
                 opsets=(17, 20)),
}

#: The ops each model is in this file for (issue 16: what real models need): its export must
#: convert them.
OPS: dict[str, set[str]] = {
    "mixtral": {"aten::histc", "aten::_grouped_mm"},
    "deepseek_v3": {"aten::histc", "aten::_grouped_mm"},
    "deepseek_v2": {"aten::polar", "aten::view_as_complex", "aten::view_as_real"},
    "qwen3_next": {"aten::linalg_solve_triangular"},
    "fnet": {"aten::fft_fftn", "aten::real"},
    "tapas": {"aten::scatter_reduce"},
    "mobilevitv2": {"aten::col2im"},
    "wavtokenizer": {"aten::col2im", "aten::polar"},
    "videoprism": {"aten::_upsample_bilinear2d_aa"},
    "dinov2_with_registers": {"aten::_upsample_bicubic2d_aa"},
    "git": {"aten::__or__", "aten::__and__"},
    "llama": {"aten::__and__"},
}

#: keyword arguments every call gets (constants in the graph)
_CALL = {"return_dict": False}
_EXTRA = {"vit": {"interpolate_pos_encoding": True}, "prophetnet": {"use_cache": False},
          "videoprism": {"interpolate_pos_encoding": True}}


@dataclasses.dataclass
class _Fixture:
    model: torch.nn.Module
    inputs: dict[tuple[int, int], dict[str, torch.Tensor]]
    expected: dict[tuple[int, int], list[np.ndarray]]


@functools.lru_cache(maxsize=1)  # the tests of one model run one after another
def _fixture(name: str) -> _Fixture:
    torch.manual_seed(0)
    model = SPECS[name].build().eval()
    inputs = {size: SPECS[name].inputs(*size) for size in SIZES}
    expected = {}
    for size, kwargs in inputs.items():
        with torch.no_grad():
            outputs = model(**kwargs, **_CALL, **_EXTRA.get(name, {}))
        expected[size] = [y.numpy() for y in outputs if y is not None]  # no loss
    return _Fixture(model, inputs, expected)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning")
@pytest.mark.parametrize(("name", "opset"),
                         [(name, opset) for name, spec in SPECS.items() for opset in spec.opsets],
                         ids=lambda item: item if isinstance(item, str) else f"opset{item}")
def test_transformers_model(name: str, opset: int) -> None:
    """One export per (model, opset): full checker, then ORT vs eager at two sizes."""
    spec, fixture = SPECS[name], _fixture(name)
    traced = fixture.inputs[SIZES[0]]
    output_names = [key for key in spec.axes if key not in traced]
    buffer = io.BytesIO()
    result = oxport.export(fixture.model, ({**traced, **_CALL, **_EXTRA.get(name, {})},), buffer,
                  opset_version=opset, input_names=list(traced), output_names=output_names,
                  dynamic_axes=spec.axes)
    converted = {entry.name for entry in result.used}
    assert OPS.get(name, set()) <= converted, f"not in the export: {OPS[name] - converted}"
    proto = onnx.load_from_string(buffer.getvalue())
    onnx.checker.check_model(proto, full_check=True)
    assert [i.name for i in proto.graph.input] == list(traced)
    for value in [*proto.graph.input, *proto.graph.output]:
        dims = value.type.tensor_type.shape.dim
        assert {axis: dims[axis].dim_param for axis in spec.axes[value.name]} == \
            spec.axes[value.name]

    session = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    for size in SIZES:
        feeds = {key: value.numpy() for key, value in fixture.inputs[size].items()}
        got = session.run(None, feeds)
        assert len(got) == len(fixture.expected[size])
        for index, (g, w) in enumerate(zip(got, fixture.expected[size])):
            np.testing.assert_allclose(g, w, rtol=spec.rtol, atol=spec.atol, equal_nan=False,
                                       err_msg=f"{name} opset {opset} size {size} "
                                               f"output {output_names[index]}")


def test_every_op_real_models_need_has_a_model() -> None:
    """Issue 16's list of ops that real transformers models need: each is in ``OPS``."""
    needed = {"histc", "_grouped_mm", "linalg_solve_triangular", "_upsample_bilinear2d_aa",
              "_upsample_bicubic2d_aa", "col2im", "fft_fftn", "real", "polar",
              "view_as_complex", "view_as_real", "scatter_reduce", "__or__", "__and__"}
    assert {f"aten::{op}" for op in needed} <= set().union(*OPS.values())
    assert set(OPS) <= set(SPECS)
