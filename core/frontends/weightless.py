"""A model whose parameters are on the meta device (shapes without values), run or captured
without weights: its meta tensors become fake CPU tensors of one ``FakeTensorMode`` while
torch.export captures it (the weights are streamed into the file afterwards:
:mod:`oxport.serialize.streamed`), or while a task runs it for example inputs
(:func:`run_weightless`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils import _pytree as pytree

from oxport.advice import listed
from oxport.errors import InvalidExportArgumentError


@contextlib.contextmanager
def weightless_capture(model: Any, weights: Any) -> Iterator[None]:
    """While the block runs, ``model``'s parameters and buffers on the meta device are fake
    CPU tensors (shapes without values, on the device of the inputs), so torch.export
    captures the model without any weight in memory; the model is restored after. Without
    ``weights`` (where the values come from when written) such a model is refused."""
    meta = _meta_state(model)
    if meta and weights is None:
        raise InvalidExportArgumentError(
            f"The model's parameters or buffers {listed([name for name, _ in meta])} are on "
            "the meta device (shapes "
            "without values): pass weights= (a safetensors checkpoint folder, or a mapping of "
            "names to tensors) to stream them into the file, or load them first.")
    with _fakified(model):
        yield


def run_weightless(model: torch.nn.Module, fn: Any) -> Any:
    """``fn()`` run with ``model``'s meta parameters and buffers as fake tensors, and the
    tensors it returns (nested in tuples, lists, dicts) as zeros of their shapes and
    dtypes: example inputs that come from running a model without weights (the KV cache a
    decoder returns). Without meta tensors, ``fn()`` as it is."""
    if not _meta_state(model):
        return fn()
    with _fakified(model) as mode, mode:
        result = fn()
    return pytree.tree_map_only(
        torch.Tensor, lambda t: torch.zeros(t.shape, dtype=t.dtype), result)


@contextlib.contextmanager
def _fakified(model: Any) -> Iterator[Any]:
    """``model``'s meta parameters and buffers as fake CPU tensors of one FakeTensorMode
    (yielded; None when there are none) while the block runs."""
    if not _meta_state(model):
        yield None
        return
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    fakes: dict[int, torch.Tensor] = {}
    swapped = []
    for module in model.modules():
        for store in (module._parameters, module._buffers):
            for name, tensor in list(store.items()):
                if tensor is None or not tensor.is_meta:
                    continue
                if id(tensor) not in fakes:
                    fake = mode.fake_tensor_converter.from_meta_and_device(
                        mode, tensor.data, torch.device("cpu"))
                    fakes[id(tensor)] = (torch.nn.Parameter(fake, tensor.requires_grad)
                                         if isinstance(tensor, torch.nn.Parameter) else fake)
                swapped.append((store, name, tensor))
                store[name] = fakes[id(tensor)]
    try:
        yield mode
    finally:
        for store, name, tensor in swapped:
            store[name] = tensor


def _meta_state(model: Any) -> list[tuple[str, torch.Tensor]]:
    """The parameters and buffers of ``model`` on the meta device."""
    if not isinstance(model, torch.nn.Module):
        return []
    return [(name, tensor) for name, tensor in
            (*model.named_parameters(remove_duplicate=False),
             *model.named_buffers(remove_duplicate=False)) if tensor.is_meta]

