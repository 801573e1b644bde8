"""The contract between a front end and the walker: :class:`FrontEnd`, what a front end
hands over (the source graph, its example inputs, names and parameters, and what happened on
the way)."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from oxport.frontends.torchscript import baked_sizes


@dataclasses.dataclass
class FrontEnd:
    """What the walker needs from the model."""

    graph: torch._C.Graph
    #: Example values of the graph's user inputs, flat, in graph order.
    example_inputs: list[Any]
    #: Suggested names of the user inputs.
    input_names: list[str]
    #: (state_dict name, tensor) for each graph input after the user inputs.
    params: list[tuple[str, torch.Tensor]]
    #: Warnings raised while tracing (TracerWarnings are re-emitted to the user too).
    warnings: list[warnings.WarningMessage] = dataclasses.field(default_factory=list)
    #: What happened to the outputs (dicts flattened, strings dropped).
    output_notes: list[str] = dataclasses.field(default_factory=list)
    scripted: bool = False
    #: A name for each output from the dict keys and namedtuple fields the model returned
    #: it under (None where there are none).
    output_names: list[str | None] = dataclasses.field(default_factory=list)
    #: For each user input, the index of the leaf of the flattened args it was made from
    #: (``pytree.tree_leaves(normalize_args(args))``).
    input_leaves: list[int] = dataclasses.field(default_factory=list)
    #: For each user input, the names ``dynamic_axes`` gives its axes ({axis: name}); the
    #: walker types those dims by name, so values computed from them carry the name too.
    input_dim_names: list[dict[int, str]] = dataclasses.field(default_factory=list)
    #: The user inputs (positions) kept in the file even when nothing reads them after
    #: folding: torch.onnx reads them at run time (a None check on an Optional tensor).
    kept_inputs: set[int] = dataclasses.field(default_factory=set)
    #: For a graph TorchScript cannot run (the torch.export front end's view): runs the
    #: source program once on the given user inputs and returns the values its nodes
    #: compute, by ``unique()`` (``find_mismatch`` compares partitions with them).
    evaluate: Callable[[Sequence[torch.Tensor]], dict[int, Any]] | None = None
    #: Sizes the trace turned into Python numbers and decisions (see :mod:`oxport.frontends.torchscript.baked_sizes`).
    baked: list[baked_sizes.BakedSize] = dataclasses.field(default_factory=list)
    #: Whether the graph's numeric sizes are the example inputs' (a trace), which dynamic
    #: axes may change, rather than sizes proven static for every input (torch.export's).
    example_sizes: bool = True

