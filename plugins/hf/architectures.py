"""The built-in architecture quirks (:mod:`oxport.plugins.hf.quirks`): what the causal-LM
sweep found that one architecture needs, each with its cause.

* JetMoe routes with ``expert_size.tolist()`` and splits its tokens by those counts: a trace
  bakes the example's counts into a ``Split`` that ONNX Runtime refuses at any other number
  of tokens. While tracing, each row's expert stays a tensor and picks its matrix.
* LongcatFlash loops over the experts some token was routed to (``nonzero``, ``.item()``):
  a trace keeps the example's experts, torch.export stops on the data-dependent loop. While
  capturing, every (token, expert) pair gathers its expert's matrices (as oxport's
  ``_grouped_mm`` does), its zero-computation experts passing the token through.
* Moshi's attention window lives only in its cache (sliding-window layers drop the oldest
  keys), not in its mask. The past crosses the model boundary as full-length layers, so the
  quirk gives Moshi the mask eager attention sees: the last ``sliding_window - 1`` past
  positions and the new ones, causally.
* CpmAnt re-reads the whole sequence at every step (its ``forward`` slices the cached prefix
  off the full ``input_ids``, and its cache also holds its prompt positions): it has no past
  in the ``text-generation-with-past`` layout, and is refused saying so (without a past, its
  padding mask comes from a Python list of positions: fixed at the exported length).

Each change applies only while oxport captures the model (tracing or torch.export): eager
PyTorch, and so the ``--verify`` reference, runs transformers' own code."""

from __future__ import annotations

import types
from typing import Any

import torch

from oxport.errors import InvalidExportArgumentError


def _capturing() -> bool:
    """Whether the model runs under oxport's tracing or torch.export front end."""
    return torch.jit.is_tracing() or torch.compiler.is_compiling()


def _patch(model: Any, class_name: str, forward: Any) -> None:
    """Give every submodule of class ``class_name`` ``forward(module, original, ...)`` (once:
    a model exported twice keeps one patch)."""
    for module in model.modules():
        if type(module).__name__ == class_name and "forward" not in vars(module):
            original = module.forward
            module.forward = types.MethodType(
                lambda self, *args, _original=original, **kwargs: forward(
                    self, _original, *args, **kwargs), module)


# -- JetMoe ----------------------------------------------------------------------------------
def _jetmoe_gating(self: Any, original: Any, hidden_states: torch.Tensor) -> Any:
    """JetMoe's top-k gating, its ``expert_size`` (counts, a Python list) replaced by each
    sorted row's expert (a tensor) while tracing."""
    if not torch.jit.is_tracing():
        return original(hidden_states)
    logits = self.layer(hidden_states).float()
    top_k_logits, top_k_indices = logits.topk(self.top_k, dim=1)
    top_k_gates = torch.softmax(top_k_logits, dim=1).type_as(hidden_states)
    row_experts, index_sorted_experts = top_k_indices.flatten().sort(0)
    batch_index = index_sorted_experts.div(self.top_k, rounding_mode="trunc")
    batch_gates = top_k_gates.flatten()[index_sorted_experts]
    return index_sorted_experts, batch_index, batch_gates, row_experts, logits


def _jetmoe_experts(self: Any, original: Any, inputs: torch.Tensor, expert_size: Any
                    ) -> torch.Tensor:
    """Each row times its expert's matrix, when the gating gave the rows' experts."""
    if not isinstance(expert_size, torch.Tensor):
        return original(inputs, expert_size)
    weights = self.weight[expert_size]  # [rows, out, in]
    return torch.bmm(weights, inputs.unsqueeze(-1)).squeeze(-1)


class JetMoeTraceableExperts:
    """JetMoe's data-dependent split, static while tracing."""

    architectures = ("JetMoeForCausalLM",)

    def prepare_model(self, model: Any) -> Any:
        _patch(model, "JetMoeTopKGating", _jetmoe_gating)
        _patch(model, "JetMoeParallelExperts", _jetmoe_experts)
        return model


# -- LongcatFlash ----------------------------------------------------------------------------
def _longcat_experts(self: Any, original: Any, hidden_states: torch.Tensor,
                     top_k_index: torch.Tensor, top_k_weights: torch.Tensor) -> torch.Tensor:
    """LongcatFlash's experts without a loop over the experts hit, while capturing: each
    (token, expert) pair gathers its expert's matrices; an index past the routed experts is
    a zero-computation expert (the token itself)."""
    if not _capturing() or self.gate_up_proj is None:
        return original(hidden_states, top_k_index, top_k_weights)
    tokens, top_k = top_k_index.shape
    experts = top_k_index.reshape(-1)
    states = hidden_states.repeat_interleave(top_k, dim=0)
    routed = experts.clamp(max=self.num_routed_experts - 1)
    gate, up = torch.bmm(self.gate_up_proj[routed], states.unsqueeze(-1)).squeeze(-1).chunk(2, -1)
    computed = torch.bmm(self.down_proj[routed], (self.act_fn(gate) * up).unsqueeze(-1))
    states = torch.where((experts < self.num_routed_experts).unsqueeze(-1),
                         computed.squeeze(-1), states)
    weighted = states * top_k_weights.reshape(-1, 1).to(states.dtype)
    return weighted.view(tokens, top_k, -1).sum(1).to(hidden_states.dtype)


class LongcatFlashCapturableExperts:
    """LongcatFlash's loop over the experts hit, a gather while capturing."""

    architectures = ("LongcatFlashForCausalLM",)

    def prepare_model(self, model: Any) -> Any:
        _patch(model, "LongcatFlashExperts", _longcat_experts)
        return model


# -- Moshi -----------------------------------------------------------------------------------
def window_mask(attention_mask: torch.Tensor, length: int, window: int,
                dtype: torch.dtype) -> torch.Tensor:
    """The additive mask ``[batch, 1, length, total]`` of the last ``length`` of ``total``
    positions (``attention_mask`` is ``[batch, total]``) seeing, causally, the new positions
    and the last ``window - 1`` past ones: what a sliding-window cache layer lets them see."""
    total = attention_mask.shape[-1]
    keys = torch.arange(total, device=attention_mask.device)
    queries = torch.arange(length, device=attention_mask.device) + (total - length)
    visible = (keys[None, :] <= queries[:, None]) \
        & (keys[None, :] > queries[:1, None] - window)
    visible = visible[None, None] & attention_mask[:, None, None, :].bool()
    mask = torch.zeros(visible.shape, dtype=dtype, device=attention_mask.device)
    return mask.masked_fill(~visible, torch.finfo(dtype).min)


def _rebuilt_full_length(cache: Any) -> bool:
    """Whether ``cache`` holds full-length key/value layers (as oxport rebuilds a past)."""
    layers = getattr(cache, "layers", None)
    return bool(layers) and all(type(layer).__name__ == "DynamicLayer" for layer in layers)


def _moshi_model(self: Any, original: Any, *args: Any, **kwargs: Any) -> Any:
    """Moshi's decoder with the window mask, while capturing with a full-length past."""
    mask, cache = kwargs.get("attention_mask"), kwargs.get("cache")
    window = getattr(self.config, "sliding_window", None)
    if _capturing() and window and mask is not None and mask.dim() == 2 \
            and _rebuilt_full_length(cache):
        new = kwargs.get("input_ids")
        length = (new if new is not None else kwargs["inputs_embeds"]).shape[1]
        kwargs["attention_mask"] = window_mask(mask, length, window, self.embed_tokens.weight.dtype)
    return original(*args, **kwargs)


class MoshiWindowInTheMask:
    """Moshi's cache-only attention window, in the mask of a rebuilt past."""

    architectures = ("MoshiForCausalLM",)

    def prepare_model(self, model: Any) -> Any:
        _patch(model, "MoshiModel", _moshi_model)
        return model


# -- CpmAnt ----------------------------------------------------------------------------------
class CpmAntNoPast:
    """CpmAnt has no past in the file contract: refused, naming why."""

    architectures = ("CpmAntForCausalLM",)

    def decoder_inputs(self, io: Any) -> Any:
        if io.with_past:
            raise InvalidExportArgumentError(
                "CpmAntForCausalLM re-reads the whole sequence at every step (its forward "
                "slices the cached prefix off the full input_ids, and its cache also holds "
                "its prompt positions), so it has no past in the text-generation-with-past "
                "layout (new tokens in, their keys and values out). Without a past it builds "
                "its padding mask from a Python list of the sequence's positions, so a "
                "text-generation file holds only at the length it was exported at.")
        return io


#: The quirks, each the object an ``oxport.hf.quirks`` entry point of pyproject.toml names.
JETMOE = JetMoeTraceableExperts()
LONGCAT_FLASH = LongcatFlashCapturableExperts()
MOSHI = MoshiWindowInTheMask()
CPMANT = CpmAntNoPast()
