"""Test cases of the built-in op packs, one module per pack.

A pack names its module with ``OpPack(..., cases="oxport.opsets.cases.<family>")``;
the op-test runner imports it when it first asks for cases, so an export never
builds the test models.
"""

from __future__ import annotations

import torch


def scalar() -> torch.Tensor:
    """A 0-d input: torch takes dim 0 or -1 on a scalar, where ONNX's ops with an axis want
    rank >= 1."""
    return torch.tensor(0.7)
