"""``genai_config.json``: what ONNX Runtime GenAI (``onnxruntime_genai``) reads to run an
exported decoder with past, in the form its model builder writes."""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path
from typing import Any

FILENAME = "genai_config.json"


def _first(value: Any) -> Any:
    """A token id, the first of a list."""
    return value[0] if isinstance(value, (list, tuple)) and value else value


def model_type(architecture: str) -> str:
    """``LlamaForCausalLM`` -> ``llama``, as the builder names the model type."""
    return architecture[:architecture.find("For")].lower() if "For" in architecture \
        else architecture.lower()


def decoder_config(model: Any, architecture: str, io: Any, filename: str = "model.onnx"
                   ) -> dict[str, Any]:
    """The ``genai_config.json`` of a decoder-only model exported with past: ``io`` is the
    task's :class:`~oxport.plugins.hf.tasks.decoder.DecoderInputs`."""
    config = model.config.get_text_config()
    generation = getattr(model, "generation_config", None)
    tokens = {name: getattr(generation, name, None) if getattr(generation, name, None)
              is not None else getattr(config, name, None)
              for name in ("bos_token_id", "eos_token_id", "pad_token_id")}
    context = getattr(config, "max_position_embeddings", None) or 2048
    inputs = {"input_ids": "input_ids", "attention_mask": "attention_mask"}
    if io.position_ids:
        inputs["position_ids"] = "position_ids"
    inputs |= {"past_key_names": "past_key_values.%d.key",
               "past_value_names": "past_key_values.%d.value"}
    eos = tokens["eos_token_id"]
    return {
        "model": {
            "bos_token_id": _first(tokens["bos_token_id"]),
            "context_length": context,
            "decoder": {
                "session_options": {"log_id": "onnxruntime-genai", "provider_options": []},
                "filename": filename,
                "head_size": io.head_dim,
                "hidden_size": getattr(config, "hidden_size", io.head_dim * io.kv_heads),
                "inputs": inputs,
                "outputs": {"logits": "logits", "present_key_names": "present.%d.key",
                            "present_value_names": "present.%d.value"},
                "num_attention_heads": getattr(config, "num_attention_heads", io.kv_heads),
                "num_hidden_layers": io.layers,
                "num_key_value_heads": io.kv_heads,
            },
            "eos_token_id": eos if eos is not None else 0,
            "pad_token_id": _first(tokens["pad_token_id"]) if tokens["pad_token_id"] is not None
            else _first(eos) if eos is not None else 0,
            "type": model_type(architecture),
            "vocab_size": config.vocab_size,
        },
        "search": {
            "diversity_penalty": 0.0, "do_sample": False, "early_stopping": True,
            "length_penalty": 1.0, "max_length": context, "min_length": 0,
            "no_repeat_ngram_size": 0, "num_beams": 1, "num_return_sequences": 1,
            "past_present_share_buffer": False, "repetition_penalty": 1.0,
            "temperature": 1.0, "top_k": 1, "top_p": 1.0,
        },
    }


def share_kv_buffer(config: dict[str, Any], op_types: Collection[tuple[str, str]]
                    ) -> dict[str, Any]:
    """``config`` with ``past_present_share_buffer`` on when the decoder's attention is
    ``com.microsoft::GroupQueryAttention`` (``target="ort"``; ``op_types``: the decoder's
    (domain, op type) pairs): ONNX Runtime GenAI then keeps one ``max_length``-long KV
    buffer per layer that the kernel appends to in place, as the builder's files run,
    instead of copying the presents into new pasts each step."""
    if ("com.microsoft", "GroupQueryAttention") in op_types:
        config["search"]["past_present_share_buffer"] = True
    return config


def write(config: dict[str, Any], output_dir: Path,
          op_types: Collection[tuple[str, str]] = ()) -> str:
    """Write ``config`` as ``genai_config.json`` (sharing the KV buffer when the decoder's
    attention allows it, :func:`share_kv_buffer`); returns the file name."""
    config = share_kv_buffer(config, op_types)
    with open(output_dir / FILENAME, "w", encoding="utf-8") as f:
        json.dump(config, f, indent=4)
    return FILENAME
