"""oxport's pytest plugin, loaded by pytest through the ``pytest11`` entry point ``oxport``
wherever oxport is installed: the fixtures an op pack's tests use, without importing
oxport's internals. Nothing heavy loads until a test asks for a fixture.

* ``oxport_roundtrip(model, args, rtol=1e-4, atol=1e-5, **export_kwargs)``: export in memory,
  run the full ONNX checker and ONNX Runtime, compare with eager PyTorch; returns ONNX
  Runtime's outputs.
* ``oxport_plugin_session``: the test runs in a new plugin session
  (:func:`oxport.plugin_manager.session_scope`): plugins it loads or fakes and its
  runtime registrations are gone after it, and the session before it is back untouched.
* ``oxport_fresh_plugins``: installed plugins are looked up again before and after the test
  (for tests that install or uninstall a pack).

The op-test runner itself is one line in a test module:
``test_my_pack = oxport.testing.op_tests("my-pack")``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from oxport.plugin_manager import PluginSession


@pytest.fixture
def oxport_roundtrip() -> Callable[..., list[Any]]:
    """Export, check, run in ONNX Runtime and compare with eager PyTorch."""
    from oxport.testing import roundtrip

    return roundtrip


@pytest.fixture
def oxport_plugin_session() -> Iterator[PluginSession]:
    """A new plugin session for the test, the previous one restored after it."""
    from oxport.plugin_manager import session_scope

    with session_scope() as session:
        yield session


@pytest.fixture
def oxport_fresh_plugins() -> Iterator[None]:
    """Plugins looked up again around the test (``oxport.plugin_manager.reset()``)."""
    from oxport import plugin_manager

    plugin_manager.reset()
    yield
    plugin_manager.reset()
