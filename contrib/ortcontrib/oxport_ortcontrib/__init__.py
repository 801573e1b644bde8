"""oxport-ortcontrib: ONNX Runtime's ``com.microsoft`` contrib ops for oxport.

Installed, it shadows the standard symbolics of ``aten::gelu`` (exact), ``aten::linalg_inv``
/ ``aten::inverse``, ``aten::grid_sampler`` (4-D) and ``aten::triu`` / ``aten::tril`` on
purpose (``override=True``); for arguments ONNX Runtime's op does not take, a symbolic
declines and the standard one converts the node. A graph pass fuses ``Add(x, bias)`` +
``Gelu`` into ``BiasGelu``. Block it with ``OXPORT_DISABLE_PLUGINS=ortcontrib``.

It also registers a runtime target, ``ort-contrib`` (``oxport.export(..., target=
"ort-contrib")``): oxport's ``ort`` target (which it extends) plus these symbolics and the
``BiasGelu`` fusion, applied only while the target is selected -- how a third party ships
a profile for its runtime.
"""

from __future__ import annotations

from oxport import hookimpl
from oxport.registry import Registrar
from oxport.targets import Target
from oxport_ortcontrib.fusion import fuse_bias_gelu
from oxport_ortcontrib.symbolics import pack

__version__ = "0.1.0"
__all__ = ["TARGET", "fuse_bias_gelu", "pack"]

TARGET = Target("ort-contrib", "oxport's ort target with com.microsoft Gelu, Inverse, "
                "GridSample, Trilu and the BiasGelu fusion", extends="ort",
                passes=[("ortcontrib.bias-gelu", fuse_bias_gelu)], symbolics=pack.symbolics())


@hookimpl
def oxport_register_symbolics(registry: Registrar) -> None:
    pack.register_into(registry)


@hookimpl
def oxport_register_passes(registry: Registrar) -> None:
    registry.register_pass("ortcontrib.bias-gelu", fuse_bias_gelu)


@hookimpl
def oxport_register_targets(registry: Registrar) -> None:
    registry.register_target(TARGET.name, TARGET)
