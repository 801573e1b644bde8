"""A template third-party pack: a PyTorch custom op and its ONNX export for oxport.

``import oxport_example_pack`` defines the op ``torch.ops.oxport_example.scaled_add``
(``x + alpha * y``); oxport loads :mod:`oxport_example_pack.exporter` through the
``oxport`` entry point declared in ``pyproject.toml``.
"""

from oxport_example_pack.ops import scaled_add

__version__ = "0.1.0"
__all__ = ["scaled_add"]
