"""The PyTorch side: a custom op defined with ``torch.library`` (as a C++ extension's
``TORCH_LIBRARY`` would define it)."""

from __future__ import annotations

import torch


@torch.library.custom_op("oxport_example::scaled_add", mutates_args=())
def scaled_add(x: torch.Tensor, y: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    """``x + alpha * y``."""
    return x + alpha * y


@scaled_add.register_fake
def _scaled_add_fake(x: torch.Tensor, y: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    """The result's shape and dtype (x and y broadcast), for torch.export and fake tensors."""
    return torch.empty(torch.broadcast_shapes(x.shape, y.shape),
                       dtype=torch.result_type(x, y), device=x.device)
