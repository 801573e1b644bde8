"""What an export did and what to look at: node provenance, tracing pitfalls, dynamic
axes that ended up static, and the :class:`ExportReport` that gathers them.

Every ONNX node remembers the TorchScript op, the source line and the plugin that made
it (:func:`node_origins`). The pitfalls are those of the seed's "Avoiding Pitfalls":
Python and NumPy values (``.item()``, ``int(t)``, ``np.*``) becoming constants of the
trace, ``Tensor.data``, and in-place updates of values read from ``tensor.shape``.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import linecache
import os
import re
import site
import sys
import sysconfig
import textwrap
import warnings
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from oxport import serialize
from oxport.ir import Graph, Node, Value

if TYPE_CHECKING:
    from oxport.exporter.result import ExportResult

_TORCH_DIR = os.path.dirname(torch.__file__)
#: Where installed libraries live (torch, transformers...): code the user does not edit.
_LIBRARY_DIRS = tuple(os.path.join(os.path.abspath(d), "") for d in {
    _TORCH_DIR, sysconfig.get_path("stdlib"), sysconfig.get_path("purelib"),
    sysconfig.get_path("platlib"), *site.getsitepackages(), site.getusersitepackages()})
#: The built-in example models (``oxport export --example``) are model code.
_EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cli",
                         "examples.py")

#: ONNX ops whose listed inputs are sizes: a traced size baked into one of them makes
#: an axis static.
SHAPE_INPUTS: dict[str, tuple[int, ...]] = {
    "Reshape": (1,), "Expand": (1,), "ConstantOfShape": (0,), "Tile": (1,),
    "Slice": (1, 2), "Range": (0, 1, 2), "Resize": (2, 3), "Upsample": (1,), "Pad": (1,),
    "Split": (1,), "CenterCropPad": (1,),
}


# -- provenance ----------------------------------------------------------------------
@dataclasses.dataclass
class NodeOrigin:
    """Where one ONNX node came from."""

    node: str
    op_type: str
    domain: str
    #: The TorchScript op it was converted from (``aten::relu``).
    torch_op: str
    source: str
    scope: str
    #: The plugin whose symbolic (or fallback) made it, e.g. ``oxport.nn`` or
    #: ``fallback:aten-fallback``; ``""`` for nodes oxport's passes made.
    plugin: str
    distribution: str | None = None
    version: str | None = None

    def describe(self) -> str:
        """E.g. ``Relu node /Relu_0 from aten::relu at m.py(5): forward, by oxport.nn
        (oxport 0.1.0)``."""
        made = f" from {self.torch_op}" if self.torch_op else ""
        where = f" at {self.source}" if self.source else ""
        dist = f" ({self.distribution} {self.version})" if self.distribution else ""
        by = f", by {self.plugin}{dist}" if self.plugin else ""
        return f"{self.op_type} node {self.node}{made}{where}{by}"

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def node_origins(result: ExportResult) -> dict[str, NodeOrigin]:
    """ONNX node name -> :class:`NodeOrigin`, for every named node of the export."""
    fallbacks = {(use.kind, use.source): use.fallback for use in result.fallback_uses}
    table = {}
    for name, node in result.serialized.nodes.items():
        table[name] = origin_of(name, node, fallbacks)
    return table


def origin_of(name: str, node: Node, fallbacks: dict[tuple[str, str], str] | None = None
              ) -> NodeOrigin:
    """The :class:`NodeOrigin` of IR node ``node``, written as ONNX node ``name``."""
    provenance = getattr(node.provenance, "provenance", None)
    plugin, dist, version = "", None, None
    if provenance is not None:
        plugin, dist, version = provenance.plugin, provenance.distribution, provenance.version
    elif fallbacks and (node.origin, node.source) in fallbacks:
        plugin = f"fallback:{fallbacks[node.origin, node.source]}"
    return NodeOrigin(name, node.op_type, node.domain, node.origin, node.source, node.scope,
                      plugin, dist, version)


# -- pitfalls ------------------------------------------------------------------------
@dataclasses.dataclass
class Pitfall:
    """A tracing pitfall found at one source line."""

    #: ``branch``, ``python-value``, ``numpy``, ``constant-tensor``, ``tensor-data``,
    #: ``inplace-shape``, ``loop``, ``unused-input``, ``dynamic-axis``.
    kind: str
    location: str
    code: str
    advice: str
    messages: list[str] = dataclasses.field(default_factory=list)
    count: int = 1

    def describe(self) -> str:
        where = self.location or "(no source line)"
        code = f": {self.code}" if self.code else ""
        return f"{where}{code}\n    [{self.kind}] {self.advice}"

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_WARNING_PITFALLS: list[tuple[re.Pattern[str], str, str]] = [
    (re.compile(r"Converting a tensor to a Python boolean"), "branch",
     "a tensor decided a Python if/and/or/assert here, such as a comparison of sizes (if "
     "x.shape[0] > 2): the trace keeps only the path this input took, and every other input "
     "takes it too. Compute both results and pick with torch.where, or script the branch "
     "(torch.jit.script; oxport export --script)."),
    (re.compile(r"Converting a tensor to a Python (number|integer|float|index|list)"),
     "python-value",
     "a tensor became a Python value here (.item(), .tolist(), int(), float()): "
     "the trace keeps the value it had while tracing as a constant. Keep it a tensor, e.g. "
     "x.reshape(y, -1) instead of x.reshape(y.item(), -1)."),
    (re.compile(r"Converting a tensor to a NumPy array"), "numpy",
     "a tensor went through NumPy here: the trace keeps the result as a constant. Use torch "
     "operators on tensors instead of numpy functions."),
    (re.compile(r"results are registered as constants"), "constant-tensor",
     "a tensor built from Python or NumPy values (torch.tensor, torch.as_tensor, "
     "torch.from_numpy) is a constant of the trace: build it from tensor operations if it "
     "must follow the inputs."),
    (re.compile(r"Iterating over a tensor|Using len to get tensor shape"), "loop",
     "Python iterates over a tensor (or takes its len) here: the trace unrolls the loop for "
     "this size. Use tensor operations, or script the loop with torch.jit.script."),
    (re.compile(r"live references to the data region being modified"), "inplace-shape",
     "an in-place operation writes to memory other traced values share (e.g. sizes taken "
     "from tensor.shape): write it out of place (n = n + 2, not n += 2)."),
]

_DATA_ADVICE = ("Tensor.data is invisible to the tracer: the value read here is baked in as a "
                "constant and the graph may ignore the input. Use .detach() instead.")
_SHAPE_ADVICE = ("in-place update of a value read from tensor.shape/size(): while tracing it "
                 "shares memory with the size it came from, so both change. Write it out of "
                 "place: {name} = {name} {op} ...")
_NUMPY_ADVICE = ("NumPy is invisible to the tracer: values computed with numpy here become "
                 "constants (fine for fixed values, wrong if they depend on the inputs). Use "
                 "torch operators on tensors instead.")


def library_file(path: str) -> bool:
    """Whether ``path`` is an installed library's code (torch's, transformers', the standard
    library's), which the user cannot act on, rather than the model's own."""
    path = os.path.abspath(path)
    return path != _EXAMPLES and path.startswith(_LIBRARY_DIRS)


def warning_pitfalls(caught: Iterable[warnings.WarningMessage]) -> list[Pitfall]:
    """The pitfalls that TracerWarnings (grouped by source line) point at in the model's
    own code (not in torch's or another library's)."""
    found: dict[tuple[str, str], Pitfall] = {}
    for message in caught:
        if library_file(message.filename):
            continue
        text = str(message.message)
        for pattern, kind, advice in _WARNING_PITFALLS:
            if pattern.search(text):
                location = f"{message.filename}:{message.lineno}"
                pitfall = found.get((kind, location))
                if pitfall is None:
                    found[kind, location] = Pitfall(kind, location,
                                                    _line(message.filename, message.lineno),
                                                    advice, [_first_sentence(text)])
                else:
                    pitfall.count += 1
                break
    return list(found.values())


def dynamic_axis_pitfalls(caught: Iterable[warnings.WarningMessage]) -> list[Pitfall]:
    """The sizes of dynamic axes that the model's code fixed, from the warnings of a
    conversion with ``dynamic_axes`` (each at the model's line that fixed it)."""
    return [Pitfall("dynamic-axis", f"{w.filename}:{w.lineno}", _line(w.filename, w.lineno),
                    str(w.message).removeprefix("oxport: "))
            for w in caught if str(w.message).startswith("oxport:")
            and "dynamic_axes makes dynamic" in str(w.message)]


def source_pitfalls(model: Any) -> list[Pitfall]:
    """Pitfalls read from the ``forward`` code of the model and its submodules (outside
    torch and the other installed libraries): ``Tensor.data``, NumPy calls, and in-place
    updates of sizes from ``.shape``."""
    found: list[Pitfall] = []
    for fn in _forward_functions(model):
        try:
            lines, first = inspect.getsourcelines(fn)
            filename = inspect.getsourcefile(fn) or ""
            tree = ast.parse(textwrap.dedent("".join(lines)))
        except (OSError, TypeError, SyntaxError):
            continue
        for lineno, kind, advice in _scan(tree):
            line = first + lineno - 1
            found.append(Pitfall(kind, f"{filename}:{line}", _line(filename, line), advice))
    return found


def graph_pitfalls(graph: Graph, input_names: Sequence[str]) -> list[Pitfall]:
    """Inputs the exported graph never reads (dropped from it, as torch.onnx drops them):
    their values were baked in (``Tensor.data``, ``.numpy()``, ``.item()``) or the model
    ignores them."""
    used = {id(v) for node in graph.walk() for v in node.input_values if v is not None}
    used |= {id(v) for v in graph.outputs}
    unread = [*graph.dropped_inputs,
              *(name for value, name in zip(graph.inputs, input_names) if id(value) not in used)]
    return [Pitfall("unused-input", "", "", f"the graph never reads input {name!r}, so it was "
                    "dropped: if the model uses it, its value was baked in as a constant "
                    "(Tensor.data, .numpy(), .item()), so the model only works for the example "
                    "value.")
            for name in unread]


def merge_pitfalls(*groups: Iterable[Pitfall]) -> list[Pitfall]:
    """One pitfall per (kind, location), the first found kept."""
    merged: dict[tuple[str, str, str], Pitfall] = {}
    for group in groups:
        for pitfall in group:
            key = (pitfall.kind, pitfall.location, pitfall.advice if not pitfall.location else "")
            if key in merged:
                merged[key].count += pitfall.count
                merged[key].messages += [m for m in pitfall.messages
                                         if m not in merged[key].messages]
            else:
                merged[key] = pitfall
    return list(merged.values())


def _forward_functions(model: Any) -> list[Any]:
    if not isinstance(model, torch.nn.Module):
        return []
    seen, result = set(), []
    for module in model.modules():
        fn = getattr(type(module), "forward", None)
        code = getattr(fn, "__code__", None)
        if code is None or id(fn) in seen or library_file(code.co_filename):
            continue
        seen.add(id(fn))
        result.append(fn)
    return result


def _scan(tree: ast.AST) -> list[tuple[int, str, str]]:
    """(line in ``tree``, kind, advice) for each pitfall the code shows."""
    sizes: set[str] = set()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _reads_size(node.value, sizes):
            for target in node.targets:
                sizes.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "data" \
                and isinstance(node.ctx, ast.Load):
            found.append((node.lineno, "tensor-data", _DATA_ADVICE))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                node.func.attr == "numpy" or isinstance(node.func.value, ast.Name)
                and node.func.value.id in ("np", "numpy")):
            found.append((node.lineno, "numpy", _NUMPY_ADVICE))
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) \
                and node.target.id in sizes:
            op = _OPERATORS.get(type(node.op), "+")
            found.append((node.lineno, "inplace-shape",
                          _SHAPE_ADVICE.format(name=node.target.id, op=op)))
    return sorted(set(found))


_OPERATORS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Div: "/"}


def _reads_size(expr: ast.AST, sizes: set[str]) -> bool:
    """Whether ``expr`` reads ``.shape``/``.size()`` or is a name already holding a size."""
    if isinstance(expr, ast.Name):
        return expr.id in sizes
    for node in ast.walk(expr):
        if isinstance(node, ast.Attribute) and node.attr == "shape":
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "size":
            return True
    return False


def _line(filename: str, lineno: int) -> str:
    return linecache.getline(filename, lineno).strip()


def _first_sentence(text: str) -> str:
    return text.split(". ")[0].strip().rstrip(".") + "."


@dataclasses.dataclass
class WarningGroup:
    """The warnings raised at one source line while tracing."""

    location: str
    code: str
    category: str
    messages: list[str]
    count: int

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def group_warnings(caught: Iterable[warnings.WarningMessage]) -> list[WarningGroup]:
    """Warnings grouped by source line, in the order first seen."""
    groups: dict[str, WarningGroup] = {}
    for message in caught:
        location = f"{message.filename}:{message.lineno}"
        text = _first_sentence(str(message.message))
        group = groups.get(location)
        if group is None:
            groups[location] = WarningGroup(location, _line(message.filename, message.lineno),
                                            message.category.__name__, [text], 1)
        else:
            group.count += 1
            if text not in group.messages:
                group.messages.append(text)
    return list(groups.values())


# -- dynamic axes that ended up static --------------------------------------------------
@dataclasses.dataclass
class StaticAxis:
    """An output axis that should follow a dynamic input axis but has a fixed size."""

    output: str
    axis: int
    size: int
    #: The dynamic axis name it should have followed.
    dim_name: str
    reason: str
    #: The source lines (with the node) that baked the size in, where found.
    culprits: list[str] = dataclasses.field(default_factory=list)

    def describe(self) -> str:
        lines = [f"output {self.output!r} axis {self.axis} is fixed at {self.size}: {self.reason}"]
        lines += [f"    made static at {c}" for c in self.culprits]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def static_axes(result: ExportResult) -> list[StaticAxis]:
    """Outputs whose axes, declared dynamic or following a dynamic input at trace time,
    have a fixed size in the exported graph; with the node and line that fixed them."""
    model = result.serialized.model
    graph = result.graph
    inputs = {}  # dim name -> traced size
    for proto, value in zip(model.graph.input, graph.inputs):
        shape = value.type().shape or ()
        for axis, dim in enumerate(proto.type.tensor_type.shape.dim):
            if dim.dim_param and axis < len(shape) and isinstance(shape[axis], int):
                inputs.setdefault(dim.dim_param, shape[axis])
    if not inputs:
        return []
    inferred = _inferred_outputs(result.serialized)
    named = {d.dim_param for o in model.graph.output for d in o.type.tensor_type.shape.dim
             if d.dim_param}
    found = []
    for proto, value in zip(model.graph.output, graph.outputs):
        dims = list(proto.type.tensor_type.shape.dim)
        actual = inferred.get(proto.name)
        for axis, dim in enumerate(dims):
            size = actual[axis] if actual and axis < len(actual) else None
            if dim.dim_param and isinstance(size, int):
                reason = (f"it is declared dynamic ({dim.dim_param!r}) but the graph computes "
                          "a fixed size")
                found.append(StaticAxis(proto.name, axis, size, dim.dim_param, reason,
                                        baked_sizes(graph, value, size)))
            elif dim.HasField("dim_value"):
                for name, traced in inputs.items():
                    if dim.dim_value == traced and name not in named:
                        reason = (f"equal to the traced size of dynamic axis {name!r}, which "
                                  "no output axis follows (likely a size that tracing froze)")
                        found.append(StaticAxis(proto.name, axis, traced, name, reason,
                                                baked_sizes(graph, value, traced)))
                        break
    return found


def _inferred_outputs(serialized: serialize.Serialized) -> dict[str, list[int | str | None]]:
    """Output dims as ONNX shape inference computes them (declared names ignored)."""
    dims = {}
    for output in serialize.inferred_outputs(serialized.model, serialized.weights).values():
        tensor = output.type.tensor_type
        if tensor.HasField("shape"):
            dims[output.name] = [d.dim_value if d.HasField("dim_value") else d.dim_param or None
                                 for d in tensor.shape.dim]
    return dims


def baked_sizes(graph: Graph, output: Value, size: int) -> list[str]:
    """The nodes that ``output`` depends on whose size inputs hold the constant ``size``:
    ``"m.py(5): forward (Reshape to the constant [3, -1], from aten::reshape)"``."""
    found = []
    for node in _ancestors(graph, output):
        for index in SHAPE_INPUTS.get(node.op_type, ()):
            if index >= len(node.input_values) or node.input_values[index] is None:
                continue
            values = constant_ints(node.input_values[index])
            if values is not None and size in values:
                shown = values if len(values) <= 8 else values[:8] + ["..."]
                what = f"{node.op_type} with the constant {shown} from {node.origin or 'a pass'}"
                text = f"{node.source or 'an unknown line'} ({what})"
                if text not in found:
                    found.append(text)
    return found


def constant_ints(value: Value) -> list[Any] | None:
    """The integers a constant value holds (a Constant node's or an initializer's)."""
    const = value.const if value.is_const else None
    producer = value.producer
    if const is None and producer is not None and producer.op_type == "Constant" \
            and "value" in producer.attrs:
        const = producer.attrs["value"][1]
    if const is None:
        return None
    try:
        tensor = torch.as_tensor(const)
    except (TypeError, ValueError, RuntimeError):
        return None
    if tensor.is_floating_point() or tensor.numel() > 64:
        return None
    return [int(v) for v in tensor.reshape(-1).tolist()]


def _ancestors(graph: Graph, output: Value) -> list[Node]:
    """The root-graph nodes ``output`` depends on, in graph order."""
    seen: set[int] = set()
    pending = [output]
    while pending:
        producer = pending.pop().producer
        if producer is None or id(producer) in seen:
            continue
        seen.add(id(producer))
        pending.extend(v for v in producer.input_values if v is not None)
    return [node for node in graph.nodes if id(node) in seen]


# -- the report ----------------------------------------------------------------------
@dataclasses.dataclass
class ExportReport:
    """A summary of one export, printable as text (``str(report)``) and as JSON."""

    opset: int
    #: plugin (distribution version) -> TorchScript op -> nodes it converted.
    ops_by_plugin: dict[str, dict[str, int]]
    #: {"op", "fallback", "source"} for every node a fallback converted.
    fallbacks: list[dict[str, str]]
    warnings: list[WarningGroup]
    pitfalls: list[Pitfall]
    static_axes: list[StaticAxis]
    #: What happened to dict and str outputs.
    output_notes: list[str]
    timings: dict[str, float]

    def to_json(self) -> dict[str, Any]:
        return {
            "opset": self.opset, "ops_by_plugin": self.ops_by_plugin,
            "fallbacks": self.fallbacks, "warnings": [w.to_json() for w in self.warnings],
            "pitfalls": [p.to_json() for p in self.pitfalls],
            "static_axes": [s.to_json() for s in self.static_axes],
            "output_notes": self.output_notes, "timings": self.timings,
        }

    def to_text(self) -> str:
        out = [f"oxport export report (opset {self.opset})", "", "Ops converted, by plugin:"]
        for plugin, ops in self.ops_by_plugin.items():
            listed = ", ".join(f"{op} x{n}" for op, n in ops.items())
            total = sum(ops.values())
            out.append(f"  {plugin}: {total} node{'s' if total != 1 else ''} ({listed})")
        sections: list[tuple[str, list[str]]] = [
            ("Fallbacks used", [f"  {f['op']} by {f['fallback']!r} at {f['source'] or '?'}"
                                for f in self.fallbacks]),
            ("Tracing warnings, by source line",
             [f"  {w.location}{' x' + str(w.count) if w.count > 1 else ''}: {w.code}\n"
              + "\n".join(f"    {m}" for m in w.messages) for w in self.warnings]),
            ("Pitfalls", [textwrap.indent(p.describe(), "  ") for p in self.pitfalls]),
            ("Dynamic axes that ended up static",
             [textwrap.indent(s.describe(), "  ") for s in self.static_axes]),
            ("Outputs changed", [f"  {note}" for note in self.output_notes]),
        ]
        for title, lines in sections:
            out += ["", f"{title}:", *(lines or ["  none"])]
        out += ["", "Timings: " + ", ".join(f"{phase} {seconds * 1000:.1f} ms"
                                            for phase, seconds in self.timings.items())]
        return "\n".join(out)

    __str__ = to_text

    def emit(self, target: str | os.PathLike[str] | None = None) -> None:
        """Print the text report (``target`` None), or write it to ``target``: JSON when
        the name ends in ``.json``, else text."""
        if target is None:
            print(self.to_text(), file=sys.stdout)
            return
        path = os.fspath(target)
        text = (json.dumps(self.to_json(), indent=2) if path.endswith(".json")
                else self.to_text())
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")


def build_report(result: ExportResult, model: Any = None) -> ExportReport:
    """The :class:`ExportReport` of ``result``; with ``model``, its ``forward`` code is
    scanned for pitfalls too."""
    by_plugin: dict[str, dict[str, int]] = {}
    for entry, count in sorted(result.used.items(), key=lambda item: item[0].name):
        ops = by_plugin.setdefault(str(entry.provenance), {})
        ops[entry.name] = ops.get(entry.name, 0) + count
    for use in result.fallback_uses:
        ops = by_plugin.setdefault(f"fallback:{use.fallback}", {})
        ops[use.kind] = ops.get(use.kind, 0) + 1
    input_names = [i.name for i in result.serialized.model.graph.input]
    pitfalls = merge_pitfalls(warning_pitfalls(result.warnings),
                              source_pitfalls(model) if model is not None else [],
                              graph_pitfalls(result.graph, input_names))
    return ExportReport(
        opset=result.opset, ops_by_plugin=by_plugin,
        fallbacks=[{"op": u.kind, "fallback": u.fallback, "source": u.source}
                   for u in result.fallback_uses],
        warnings=group_warnings(result.warnings), pitfalls=pitfalls,
        static_axes=static_axes(result), output_notes=list(result.output_notes),
        timings=dict(result.timings))


__all__ = ["ExportReport", "NodeOrigin", "Pitfall", "StaticAxis", "WarningGroup",
           "baked_sizes", "build_report", "graph_pitfalls", "group_warnings", "merge_pitfalls",
           "node_origins", "source_pitfalls", "static_axes", "warning_pitfalls"]
