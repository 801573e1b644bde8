"""A mixture-of-experts router whose gate gives every expert the same logit (transformers
initializes some at zero: Afmoe's ``AfmoeTokenChoiceRouter``) makes every token's top-k
selection a tie. ``torch.topk`` breaks ties in an order of its kernel's choosing, ONNX
``TopK`` by the lowest index, so the exported model routes tokens to other experts than eager
PyTorch and its outputs differ, though both are right. After an export that converted a
top-k, this plugin warns, naming the routers: the file is fine with trained weights."""

from __future__ import annotations

import warnings
from typing import Any

import torch

import oxport
from oxport.advice import listed

#: The config fields transformers names the number of routed experts with.
_EXPERT_COUNTS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
#: Parameter names of a router's gate (a Linear's weight, or the router's own weight).
_GATE_NAMES = ("gate.weight", "router.weight", "router.gate.weight", "gate_proj_router.weight")


def expert_counts(model: torch.nn.Module) -> set[int]:
    """The numbers of routed experts that the model's config (and sub-configs) declare."""
    counts: set[int] = set()
    configs = [getattr(model, "config", None)]
    while configs:
        config = configs.pop()
        if config is None:
            continue
        for field in _EXPERT_COUNTS:
            value = getattr(config, field, None)
            if isinstance(value, int) and value > 1:
                counts.add(value)
        configs += [getattr(config, name, None) for name in ("text_config", "decoder")]
    return counts


def tied_routers(model: torch.nn.Module) -> list[str]:
    """The router gates (by parameter name) whose rows, one an expert, are all equal: every
    token's expert logits tie."""
    counts = expert_counts(model)
    tied = []
    for name, weight in model.named_parameters():
        if weight.dim() != 2 or weight.shape[0] not in counts or not name.endswith(_GATE_NAMES):
            continue
        with torch.no_grad():
            if bool((weight == weight[:1]).all()):
                tied.append(name)
    return tied


def _converted_top_k(result: Any) -> bool:
    return any("topk" in entry.name for entry in result.used)


@oxport.hookimpl
def oxport_model_exported(model: Any, result: Any) -> None:
    """Warn when the export's top-k ranks experts whose router gives them equal logits."""
    if not isinstance(model, torch.nn.Module) or not _converted_top_k(result):
        return
    tied = tied_routers(model)
    if tied:
        shown = listed(tied, quote=False)
        warnings.warn(
            f"oxport: the mixture-of-experts router{'s' if len(tied) > 1 else ''} {shown} "
            "give every expert the same logit (an untrained, zero-initialized gate): each "
            "token's top-k experts tie, and ONNX TopK breaks ties by the lowest index where "
            "torch.topk picks others, so the exported model routes differently and its outputs "
            "differ from eager PyTorch. Export trained weights (or give the gate distinct "
            "rows) to compare them.", UserWarning, stacklevel=2)
