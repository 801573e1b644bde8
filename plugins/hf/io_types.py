"""transformers' KV caches at the model boundary: a ``DynamicCache`` argument is the named
inputs ``<argument>.<layer>.key`` / ``.value`` (``[batch, kv_heads, past, head_dim]``),
rebuilt into a cache before the model runs, and a cache the model returns is the outputs
named the same way; an ``EncoderDecoderCache`` adds ``.decoder`` / ``.encoder`` before
``key``/``value``, as optimum names them.

A cache is rebuilt with full-length layers: a sliding-window layer keeps every past position
and the model's mask hides those outside the window (an ONNX graph cannot keep the window's
running offset, which lives in Python), so results match transformers at every length."""

from __future__ import annotations

from typing import Any

import oxport

#: The cache layers that are a key and a value tensor growing along the sequence.
_KEY_VALUE_LAYERS = ("DynamicLayer", "DynamicSlidingWindowLayer")


def _layer_tensors(cache: Any, where: str) -> list[tuple[Any, Any]]:
    """Each layer's (keys, values); a layer not yet filled is empty, a layer of another kind
    (a linear-attention or static layer) is refused with what to do instead."""
    pairs = []
    for index, layer in enumerate(cache.layers):
        if type(layer).__name__ not in _KEY_VALUE_LAYERS:
            raise oxport.OnnxExporterError(
                f"Layer {index} of the {type(cache).__name__} at {where} is a "
                f"{type(layer).__name__}, which has no ONNX form here: only key/value layers "
                f"({', '.join(_KEY_VALUE_LAYERS)}) cross the model boundary.")
        if not layer.is_initialized:
            raise oxport.OnnxExporterError(
                f"Layer {index} of the {type(cache).__name__} at {where} is empty: give every "
                "layer its past keys and values (zero-length past: tensors of shape "
                "[batch, kv_heads, 0, head_dim]).")
        pairs.append((layer.keys, layer.values))
    return pairs


def flatten_dynamic_cache(cache: Any) -> tuple[list[tuple[str, Any]], int]:
    """A DynamicCache as ``<layer>.key`` / ``<layer>.value`` tensors."""
    children = []
    for index, (keys, values) in enumerate(_layer_tensors(cache, "the model boundary")):
        children += [(f"{index}.key", keys), (f"{index}.value", values)]
    return children, len(children) // 2


def unflatten_dynamic_cache(children: list[Any], layers: int) -> Any:
    """A DynamicCache holding the given keys and values, one full-length layer each."""
    from transformers.cache_utils import DynamicCache
    cache = DynamicCache()
    for index in range(layers):
        cache.update(children[2 * index], children[2 * index + 1], index)
    return cache


def flatten_encoder_decoder_cache(cache: Any) -> tuple[list[tuple[str, Any]], int]:
    """An EncoderDecoderCache as ``<layer>.decoder.key|value`` (self-attention) then
    ``<layer>.encoder.key|value`` (cross-attention) tensors, layer by layer."""
    decoder = _layer_tensors(cache.self_attention_cache, "the decoder's self-attention cache")
    encoder = _layer_tensors(cache.cross_attention_cache, "the cross-attention cache")
    if len(encoder) != len(decoder):
        raise oxport.OnnxExporterError(
            f"The EncoderDecoderCache has {len(decoder)} self-attention layers but "
            f"{len(encoder)} cross-attention ones: fill both for every layer.")
    children = []
    for index, ((dk, dv), (ek, ev)) in enumerate(zip(decoder, encoder)):
        children += [(f"{index}.decoder.key", dk), (f"{index}.decoder.value", dv),
                     (f"{index}.encoder.key", ek), (f"{index}.encoder.value", ev)]
    return children, len(decoder)


def unflatten_encoder_decoder_cache(children: list[Any], layers: int) -> Any:
    """An EncoderDecoderCache from its layers' four tensors each."""
    from transformers.cache_utils import DynamicCache, EncoderDecoderCache
    decoder, encoder = DynamicCache(), DynamicCache()
    for index in range(layers):
        dk, dv, ek, ev = children[4 * index:4 * index + 4]
        decoder.update(dk, dv, index)
        encoder.update(ek, ev, index)
    return EncoderDecoderCache(decoder, encoder)  # non-empty cross-attention: reused


@oxport.hookimpl
def oxport_register_io_types(registry: Any) -> None:
    """transformers' key/value caches."""
    registry.register_io_type("transformers.cache_utils.DynamicCache",
                              flatten_dynamic_cache, unflatten_dynamic_cache)
    registry.register_io_type("transformers.cache_utils.EncoderDecoderCache",
                              flatten_encoder_decoder_cache, unflatten_encoder_decoder_cache)
