"""oxport-ortcontrib: ONNX Runtime's ``com.microsoft`` contrib ops for oxport.

Installed, it shadows the standard symbolics of ``aten::gelu`` (exact), ``aten::linalg_inv``
/ ``aten::inverse``, ``aten::grid_sampler`` (4-D) and ``aten::triu`` / ``aten::tril`` on
purpose (``override=True``); for arguments ONNX Runtime's op does not take, a symbolic
declines and the standard one converts the node. A graph pass fuses ``Add(x, bias)`` +
``Gelu`` into ``BiasGelu``. Block it with ``OXPORT_DISABLE_PLUGINS=ortcontrib``.
"""

from __future__ import annotations

from oxport import hookimpl
from oxport.registry import Registrar
from oxport_ortcontrib.fusion import fuse_bias_gelu
from oxport_ortcontrib.symbolics import pack

__version__ = "0.1.0"
__all__ = ["fuse_bias_gelu", "pack"]


@hookimpl
def oxport_register_symbolics(registry: Registrar) -> None:
    pack.register_into(registry)


@hookimpl
def oxport_register_passes(registry: Registrar) -> None:
    registry.register_pass("ortcontrib.bias-gelu", fuse_bias_gelu)
