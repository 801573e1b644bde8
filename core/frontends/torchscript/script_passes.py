"""TorchScript passes for graphs with control flow (scripted code, or traced code
calling scripted functions). General graph surgery only; nothing ONNX-specific.

TorchScript lets a loop body or an ``if`` branch mutate a tensor or a list
defined outside it (``res.append(x)``, ``y[i] = v``, ``acc += x``) without the
block saying so. ONNX subgraphs are functional, so :func:`thread_mutations`
makes every such value explicit: a loop carries it (an extra input, block input,
block output and output of ``prim::Loop``), an ``if`` returns it from both
branches (an extra output of ``prim::If``), and later uses read the new value.
Inside a block the walker then tracks the mutation like straight-line code.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterator

import torch

_CONTROL_FLOW = ("prim::Loop", "prim::If")


def thread_mutations(graph: torch._C.Graph) -> None:
    """Make values mutated inside ``prim::Loop``/``prim::If`` blocks explicit block
    outputs (loop-carried for loops); views of them are recomputed from their base."""
    _thread_block(graph, graph.block())


def has_control_flow(graph: torch._C.Graph) -> bool:
    """Whether the graph has a ``prim::Loop`` or ``prim::If`` anywhere."""
    return any(graph.findAllNodes(kind) for kind in _CONTROL_FLOW)


def _thread_block(graph: torch._C.Graph, block: torch._C.Block) -> None:
    for node in list(block.nodes()):
        if node.kind() not in _CONTROL_FLOW:
            continue
        bases: dict[int, torch._C.Value] = {}
        views: dict[int, torch._C.Value] = {}
        for inner in _nested_nodes(node):
            for target in mutated_inputs(inner):
                chain = _view_chain(target)
                for value in reversed(chain):  # base first, then views of it outwards
                    if _inside(value.node(), node):
                        continue
                    if value is chain[-1] or not is_view(value.node()):
                        bases.setdefault(value.unique(), value)
                    else:
                        views.setdefault(value.unique(), value)
        # Per block of ``node`` (and for after it): outer value -> the value standing for it.
        scopes: list[dict[int, torch._C.Value]] = [{} for _ in node.blocks()]
        after: dict[int, torch._C.Value] = {}
        for base in bases.values():
            threaded = _carry(node, base) if node.kind() == "prim::Loop" \
                else _return_from_branches(node, base)
            for scope, inner in zip(scopes, threaded[0]):
                scope[base.unique()] = inner
            after[base.unique()] = threaded[1]
        cursors: list[torch._C.Node | None] = [None for _ in node.blocks()] + [node]
        for view in views.values():
            _recompute_view(graph, node, view, scopes, after, cursors)
        for inner_block in node.blocks():
            _thread_block(graph, inner_block)


def _nested_nodes(node: torch._C.Node) -> Iterator[torch._C.Node]:
    for block in node.blocks():
        for inner in block.nodes():
            yield inner
            yield from _nested_nodes(inner)


@functools.lru_cache(maxsize=None)
def _schema_info(schema: str) -> tuple[tuple[int, ...], bool]:
    """(indices of written arguments, whether output 0 is a view of argument 0)."""
    if schema == "(no schema)":
        return (), False
    parsed = torch._C.parse_schema(schema)
    written = tuple(i for i, arg in enumerate(parsed.arguments)
                    if arg.alias_info is not None and arg.alias_info.is_write)
    view = False
    if parsed.returns and parsed.arguments:
        out, first = parsed.returns[0].alias_info, parsed.arguments[0].alias_info
        view = (out is not None and first is not None and not out.is_write
                and bool(set(out.before_set) & set(first.before_set))
                and "*" not in out.before_set)
    return written, view


def _schema(node: torch._C.Node) -> str:
    return node.schema() if node.kind().startswith("aten::") else "(no schema)"


def mutated_inputs(node: torch._C.Node) -> list[torch._C.Value]:
    """The inputs an op writes to (``self`` of ``add_``, the list of ``append``...)."""
    written, _ = _schema_info(_schema(node))
    inputs = list(node.inputs())
    return [inputs[i] for i in written if i < len(inputs)]


def is_view(node: torch._C.Node) -> bool:
    """Whether the node's first output aliases its first input (select, slice, view...)."""
    return _schema_info(_schema(node))[1]


def _view_chain(value: torch._C.Value) -> list[torch._C.Value]:
    """``value``, then the value it views, and so on up to its base."""
    chain = [value]
    while is_view(chain[-1].node()) and chain[-1].node().outputsAt(0) == chain[-1]:
        chain.append(chain[-1].node().inputsAt(0))
    return chain


def _inside(node: torch._C.Node, container: torch._C.Node) -> bool:
    """Whether ``node`` is nested in one of ``container``'s blocks."""
    block = node.owningBlock()
    while block is not None:
        owner = block.owningNode()
        if owner is None:
            return False
        if owner == container:
            return True
        block = owner.owningBlock()
    return False


def _anchor(node: torch._C.Node, block: torch._C.Block) -> torch._C.Node | None:
    """The node of ``block`` that is ``node`` or contains it (None if not in ``block``)."""
    while node.owningBlock() != block:
        owner = node.owningBlock().owningNode()
        if owner is None:
            return None
        node = owner
    return node


def _replace_after(value: torch._C.Value, node: torch._C.Node, new: torch._C.Value) -> None:
    """Uses of ``value`` after ``node`` (in ``node``'s block and deeper) read ``new``."""
    block = node.owningBlock()
    for use in list(value.uses()):
        user = use.user
        if user == node or _inside(user, node):
            continue
        anchor = _anchor(user, block)
        if anchor is not None and anchor.isAfter(node):
            user.replaceInput(use.offset, new)


def _carry(loop: torch._C.Node, value: torch._C.Value
           ) -> tuple[list[torch._C.Value], torch._C.Value]:
    body = next(loop.blocks())
    inner = body.addInputToBlock()
    inner.setType(value.type())
    for use in list(value.uses()):
        if _inside(use.user, loop):
            use.user.replaceInput(use.offset, inner)
    body.registerOutput(inner)
    loop.addInput(value)
    out = loop.addOutput()
    out.setType(value.type())
    _replace_after(value, loop, out)
    return [inner], out


def _return_from_branches(if_node: torch._C.Node, value: torch._C.Value
                          ) -> tuple[list[torch._C.Value], torch._C.Value]:
    for block in if_node.blocks():
        block.registerOutput(value)
    out = if_node.addOutput()
    out.setType(value.type())
    _replace_after(value, if_node, out)
    return [value for _ in if_node.blocks()], out


def _recompute_view(graph: torch._C.Graph, node: torch._C.Node, view: torch._C.Value,
                    scopes: list[dict[int, torch._C.Value]],
                    after: dict[int, torch._C.Value],
                    cursors: list[torch._C.Node | None]) -> None:
    """Inside ``node``'s blocks and after it, ``view`` is taken again from its (threaded)
    base, so writes through it reach the base and reads see the base's new content."""
    producer = view.node()
    parent = producer.inputsAt(0)
    for index, (block, scope) in enumerate(zip(node.blocks(), scopes)):
        uses = [u for u in view.uses() if _anchor(u.user, block) is not None]
        clone = _clone(graph, producer, scope.get(parent.unique(), parent))
        if cursors[index] is None:
            clone.insertBefore(_first(block))
        else:
            clone.insertAfter(cursors[index])
        cursors[index] = clone
        scope[view.unique()] = clone.outputsAt(0)
        for use in uses:
            use.user.replaceInput(use.offset, clone.outputsAt(0))
    clone = _clone(graph, producer, after.get(parent.unique(), parent))
    clone.insertAfter(cursors[-1])
    cursors[-1] = clone
    after[view.unique()] = clone.outputsAt(0)
    _replace_after(view, node, clone.outputsAt(0))


def _first(block: torch._C.Block) -> torch._C.Node:
    for node in block.nodes():
        return node
    return block.returnNode()


def _clone(graph: torch._C.Graph, producer: torch._C.Node,
           source: torch._C.Value) -> torch._C.Node:
    clone = graph.createClone(producer, lambda v: v)
    clone.replaceInput(0, source)
    for old, new in zip(producer.outputs(), clone.outputs()):
        new.setType(old.type())
    return clone


# -- constructs ONNX cannot express ----------------------------------------------------
#: TorchScript value types an ONNX graph has no counterpart for, by what users call them.
_CONSTRUCTS = {
    "DictType": ("a dict", "ONNX has no dict type; use tensors, or a tuple of tensors"),
    "ClassType": ("an instance of a scripted class", "inline the class's tensors into the "
                  "module (or its methods into forward)"),
    "FutureType": ("torch.jit.fork/wait", "call the function directly"),
}


def unsupported_constructs(graph: torch._C.Graph) -> list[str]:
    """One line per construct ONNX cannot express (dicts, objects, futures), naming it and
    its source line; error paths (``raise``) are skipped. (Strings are left to the
    conversion: most are constants, or fold with the branches that choose them.)"""
    found: list[str] = []
    _scan(graph.block(), found)
    return found


def _scan(block: torch._C.Block, found: list[str]) -> None:
    for node in block.nodes():
        if node.kind() == "prim::If" and _raising_branches(node):
            for inner in node.blocks():
                if not any(n.kind() == "prim::RaiseException" for n in inner.nodes()):
                    _scan(inner, found)
            continue
        if node.kind() != "prim::Constant":
            for value in node.outputs():
                what = _CONSTRUCTS.get(value.type().kind())
                if what is not None:
                    line = f"  - {what[0]} ({node.kind()}) at {_source(node)}: {what[1]}"
                    if line not in found:
                        found.append(line)
                    break
        for inner in node.blocks():
            _scan(inner, found)


def _raising_branches(node: torch._C.Node) -> bool:
    return any(n.kind() == "prim::RaiseException" for b in node.blocks() for n in b.nodes())


def _source(node: torch._C.Node) -> str:
    """The user's line for ``node`` (or for the first node that uses its output)."""
    candidates = [node] + [use.user for value in node.outputs() for use in value.uses()]
    for candidate in candidates:
        text = candidate.sourceRange()
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if lines:
            return lines[0]
    return "an unknown line"


def tuple_lowering_problem(graph: torch._C.Graph) -> str:
    """Why tuples could not be flattened: the first op that takes or holds a tuple."""
    for node in graph.findAllNodes("aten::append") + graph.findAllNodes("prim::ListConstruct"):
        types = [v.type() for v in node.inputs()] + [v.type() for v in node.outputs()]
        if any("Tuple" in str(t) for t in types):
            return (f"a list of tuples ({node.kind()} at {_source(node)}): ONNX Sequences hold "
                    "tensors only; keep one list per tuple element instead")
    return "a tuple that cannot be flattened into separate values"


# -- attributes assigned in forward -----------------------------------------------------------
AttributePath = tuple[str, ...]


def attributes_as_values(graph: torch._C.Graph) -> None:
    """``self.x = value`` (``prim::SetAttr``, kept by freezing) becomes a value: later reads
    of the attribute read it, and an ``if`` or loop that assigns it returns it from its
    blocks (a loop carries it). Reads before any assignment read the attribute as it is
    at export. Any type and shape: a tensor, a number, a list (``self.boxes = []`` then
    ``self.boxes.append(t)``), None."""
    written = {_set_path(node) for node in graph.findAllNodes("prim::SetAttr")}
    written.discard(None)
    if written:
        _attributes_in_block(graph, graph.block(), written, {}, _attribute_types(graph))


def _attribute_path(value: torch._C.Value) -> AttributePath | None:
    """The attribute names from the module (the graph's first input) to ``value``."""
    path: list[str] = []
    while value.node().kind() == "prim::GetAttr":
        path.insert(0, value.node().s("name"))
        value = value.node().inputsAt(0)
    return tuple(path) if value.node().kind() == "prim::Param" and value.offset() == 0 \
        else None


def _set_path(node: torch._C.Node) -> AttributePath | None:
    owner = _attribute_path(node.inputsAt(0))
    return None if owner is None else (*owner, node.s("name"))


def _attribute_types(graph: torch._C.Graph) -> dict[AttributePath, torch._C.Type]:
    """The type of each attribute (and submodule) path the graph reads."""
    types: dict[AttributePath, torch._C.Type] = {}
    for node in graph.findAllNodes("prim::GetAttr"):
        path = _attribute_path(node.output())
        if path is not None:
            types.setdefault(path, node.output().type())
    for node in graph.findAllNodes("prim::SetAttr"):
        path = _set_path(node)
        if path is not None:
            types.setdefault(path, node.inputsAt(1).type())
    return types


def _attributes_in_block(graph: torch._C.Graph, block: torch._C.Block,
                         written: set[AttributePath], env: dict[AttributePath, torch._C.Value],
                         types: dict[AttributePath, torch._C.Type]) -> None:
    """Rewrite the block's attribute reads and writes of ``written`` paths with ``env``
    (path -> its current value), which the block updates."""
    for node in list(block.nodes()):
        kind = node.kind()
        if kind == "prim::SetAttr" and _set_path(node) in written:
            env[_set_path(node)] = node.inputsAt(1)
            node.destroy()
        elif kind == "prim::GetAttr" and _attribute_path(node.output()) in env:
            node.output().replaceAllUsesWith(env[_attribute_path(node.output())])
            node.destroy()
        elif kind in _CONTROL_FLOW:
            assigned = sorted({_set_path(n) for n in _nested_nodes(node)
                               if n.kind() == "prim::SetAttr"} & written)
            for path in assigned:
                if path not in env:
                    env[path] = _read_attribute(graph, node, path, types)
            if kind == "prim::Loop":
                _attributes_through_loop(graph, node, assigned, written, env, types)
            else:
                _attributes_through_if(graph, node, assigned, written, env, types)


def _read_attribute(graph: torch._C.Graph, before: torch._C.Node, path: AttributePath,
                    types: dict[AttributePath, torch._C.Type]) -> torch._C.Value:
    """A read of the attribute at ``path`` (as it is at export), inserted before ``before``."""
    value = next(graph.inputs())
    for depth in range(1, len(path) + 1):
        read = graph.create("prim::GetAttr", [value], 1)
        read.s_("name", path[depth - 1])
        read.output().setType(types[path[:depth]])
        read.insertBefore(before)
        value = read.output()
    return value


def _attributes_through_if(graph: torch._C.Graph, node: torch._C.Node,
                           assigned: list[AttributePath], written: set[AttributePath],
                           env: dict[AttributePath, torch._C.Value],
                           types: dict[AttributePath, torch._C.Type]) -> None:
    ends = []
    for block in node.blocks():
        scope = dict(env)
        _attributes_in_block(graph, block, written, scope, types)
        ends.append(scope)
    for path in assigned:
        for block, scope in zip(node.blocks(), ends):
            block.registerOutput(scope[path])
        out = node.addOutput()
        out.setType(types[path])
        env[path] = out


def _attributes_through_loop(graph: torch._C.Graph, node: torch._C.Node,
                             assigned: list[AttributePath], written: set[AttributePath],
                             env: dict[AttributePath, torch._C.Value],
                             types: dict[AttributePath, torch._C.Type]) -> None:
    body = next(node.blocks())
    scope = dict(env)
    for path in assigned:
        node.addInput(env[path])
        inner = body.addInputToBlock()
        inner.setType(types[path])
        scope[path] = inner
    _attributes_in_block(graph, body, written, scope, types)
    for path in assigned:
        body.registerOutput(scope[path])
        out = node.addOutput()
        out.setType(types[path])
        env[path] = out


# -- sizes the input types know ------------------------------------------------------------
def fold_static_sizes(graph: torch._C.Graph, dynamic: dict[int, set[int]] | None = None, *,
                      traced: bool = False) -> None:
    """``x.size(d)``, ``x.size()`` and ``x.dim()`` become constants where ``x``'s type knows
    them, and the numbers computed from them fold (``float(n) / 2``, ``n - 1``): as in
    torch.onnx, the counts and coefficients symbolics need as constants (``chunk``'s
    chunks, ``baddbmm``'s beta, ``nll_loss``'s ignore_index) are constants then.

    With ``dynamic`` (graph input index -> the axes ``dynamic_axes`` names), only the
    sizes of graph inputs at their other axes fold: a trace types every value with the
    sizes of that one run, and what a model computes from its own tensors' sizes is the
    packs' to convert. Without it every type is trusted (a scripted graph's inputs
    leave their dynamic axes unknown, and nothing else has sizes). A scripted graph then
    propagates the constants through numbers and branches (TorchScript's pass) and folds
    lists of numbers built from constants (``[1] * 6``, ``[1] * k + list(x.size())``),
    folded sizes or not; a ``traced`` one only runs the arithmetic the tracer recorded on
    sizes (its other ops on constants are left for the packs to convert).
    """
    inputs = {value.unique(): index for index, value in enumerate(graph.inputs())}
    folded = False
    for node in graph.findAllNodes("aten::size") + graph.findAllNodes("aten::dim"):
        source = node.inputsAt(0)
        if dynamic is None or node.kind() == "aten::dim":
            known = _static_size(node, set())
        elif source.unique() in inputs:
            known = _static_size(node, dynamic.get(inputs[source.unique()], set()))
        else:
            known = None
        if known is not None:
            with graph.insert_point_guard(node):
                node.output().replaceAllUsesWith(graph.insertConstant(known))
            node.destroy()
            folded = True
    if folded and not traced:
        torch._C._jit_pass_constant_propagation_immutable_types(graph)
    if folded or not traced:
        _fold_size_arithmetic(graph, lists=not traced)


#: Ops on numbers (or the 0-d tensors a trace makes of them) that fold on constants.
_ARITHMETIC = frozenset(f"aten::{name}" for name in (
    "add", "sub", "mul", "div", "floor_divide", "floordiv", "remainder", "neg", "floor",
    "ceil", "Int", "Float", "Bool", "ScalarImplicit")) | {"prim::NumToTensor"}


#: Ops on lists of numbers that fold on constants (``[1] * (3 - x.dim()) + list(x.size())``
#: in ``torch.stft``, ``_infer_size`` in ``F.binary_cross_entropy``), which TorchScript's
#: constant propagation of immutable types leaves;
#: run in Python, whose list operators these are (TorchScript's generic list ops take no
#: Python lists).
_LIST_OPS: dict[str, Callable[..., object]] = {
    "aten::list": list, "aten::add": operator.add, "aten::mul": operator.mul,
    "aten::slice": lambda items, start, end, step: items[start:end:step],
    "aten::__getitem__": operator.getitem, "aten::len": len,
    "aten::broadcast_shapes": lambda a, b: list(torch.broadcast_shapes(a, b))}
_NUMBER_LIST_KINDS = ("IntType", "FloatType", "BoolType")
_AS_NUMBER: dict[str, Callable[[object], object]] = {"IntType": int, "FloatType": float,
                                                     "BoolType": bool}


def _fold_size_arithmetic(graph: torch._C.Graph, *, lists: bool = False) -> None:
    """Arithmetic on constants producing a number or a 0-d tensor runs now: a trace records
    ``x.size(0) // 2`` as tensor ops on the size (``prim::NumToTensor``, ``floor_divide``,
    ``aten::Int``), which TorchScript's constant propagation of numbers leaves. With
    ``lists``, lists of numbers built from constants and never written (``[1] * n``,
    ``list(x.size())``, ``a + b``, ``shape[-2:]``) fold too."""
    for node in list(graph.nodes()):
        if lists and _is_constant_number_list(node):
            with graph.insert_point_guard(node):
                node.output().replaceAllUsesWith(graph.insertConstant(
                    [v.toIValue() for v in node.inputs()]))
            node.destroy()
            continue
        on_lists = any(_is_number_list(v) for v in node.inputs())
        if node.kind() not in (_LIST_OPS if on_lists else _ARITHMETIC) \
                or not lists and on_lists or node.outputsSize() != 1 \
                or any(v.node().kind() != "prim::Constant" for v in node.inputs()):
            continue
        out = node.output().type()
        if out.kind() == "TensorType" and out.dim() != 0 or out.kind() == "ListType" and not (
                _is_number_list(node.output()) and _never_written(node.output())):
            continue
        if on_lists:
            operation = _LIST_OPS[node.kind()]
        else:
            operation = torch._C._jit_get_operation(node.kind())
            operation = operation[0] if isinstance(operation, tuple) else operation
        try:
            result = operation(*(v.toIValue() for v in node.inputs()))
        except (RuntimeError, IndexError):  # division by zero, an index out of range: left to run
            continue
        if isinstance(result, torch.Tensor) and out.kind() in _AS_NUMBER:
            result = _AS_NUMBER[out.kind()](result.item())  # (``n - 1`` ran as Tensor ops)
        with graph.insert_point_guard(node):
            node.output().replaceAllUsesWith(graph.insertConstant(result))
        node.destroy()


def _is_number_list(value: torch._C.Value) -> bool:
    t = value.type()
    return t.kind() == "ListType" and t.getElementType().kind() in _NUMBER_LIST_KINDS


def _never_written(value: torch._C.Value) -> bool:
    """Whether no use of a list can change it: no op writes it (``append``, ``x[i] = v``)
    and no block receives it (a loop or branch might)."""
    return all(not list(use.user.blocks()) and value not in mutated_inputs(use.user)
               for use in value.uses())


def _is_constant_number_list(node: torch._C.Node) -> bool:
    """A ``prim::ListConstruct`` of constant numbers that nothing writes afterwards."""
    return node.kind() == "prim::ListConstruct" and _is_number_list(node.output()) \
        and all(v.node().kind() == "prim::Constant" for v in node.inputs()) \
        and _never_written(node.output())


def _static_size(node: torch._C.Node, dynamic: set[int]) -> int | list[int] | None:
    """What a ``size``/``dim`` node returns, when its input's type knows it (sizes at the
    ``dynamic`` axes are unknown); an Optional refined to a tensor has its argument's."""
    source = node.inputsAt(0)
    while source.node().kind() == "prim::unchecked_cast":
        source = source.node().inputsAt(0)
    t = source.type()
    if t.kind() != "TensorType" or t.dim() is None:
        return None
    if node.kind() == "aten::dim":
        return t.dim()
    rank = t.dim()
    sizes = [None if axis in dynamic or axis - rank in dynamic else size
             for axis, size in enumerate(t.varyingSizes())]
    if node.inputsSize() == 1:
        return None if None in sizes else list(sizes)
    index = _constant(node.inputsAt(1))
    if not isinstance(index, int) or not -rank <= index < rank:
        return None
    return sizes[index]


# -- loops that only compute numbers -----------------------------------------------------
#: Loops over numbers run at most this many times are unrolled (F.interpolate's sizes).
UNROLL_MAX_TRIPS = 16
_NUMBER_KINDS = ("IntType", "FloatType", "BoolType")


def unroll_number_loops(graph: torch._C.Graph) -> None:
    """Unroll loops with a constant trip count that compute only numbers and lists of
    numbers (``[scale for _ in range(dim)]`` in F.interpolate): the lists are then known
    item by item, so ops that take them as constants (sizes, scale factors) see them."""
    for loop in graph.findAllNodes("prim::Loop"):
        trips = _constant(loop.inputsAt(0))
        if not isinstance(trips, int) or not 0 <= trips <= UNROLL_MAX_TRIPS \
                or _constant(loop.inputsAt(1)) is not True or not _numbers_only(loop):
            continue
        body = next(loop.blocks())
        if _constant(list(body.outputs())[0]) is not True:
            continue
        carried = list(loop.inputs())[2:]
        for index in range(trips):
            with graph.insert_point_guard(loop):
                counter = graph.insertConstant(index)
            mapping = {body_input.unique(): value for body_input, value
                       in zip(body.inputs(), [counter, *carried])}
            for inner in body.nodes():
                clone = graph.createClone(inner, lambda v: mapping.get(v.unique(), v))
                clone.insertBefore(loop)
                for old, new in zip(inner.outputs(), clone.outputs()):
                    new.setType(old.type())
                    mapping[old.unique()] = new
            carried = [mapping.get(v.unique(), v) for v in list(body.outputs())[1:]]
        for output, value in zip(loop.outputs(), carried):
            output.replaceAllUsesWith(value)
        loop.destroy()


def _constant(value: torch._C.Value) -> object:
    return value.toIValue() if value.node().kind() == "prim::Constant" else None


def _numbers_only(loop: torch._C.Node) -> bool:
    """Whether a loop carries and computes only numbers, lists of numbers and bools."""
    def number(t: torch._C.Type) -> bool:
        if t.kind() == "ListType":
            t = t.getElementType()
        return t.kind() in _NUMBER_KINDS

    return all(number(v.type()) for v in list(loop.inputs())[2:]) and all(
        number(out.type()) or out.type().kind() == "NoneType"
        for inner in _nested_nodes(loop) for out in inner.outputs())


# -- None checks that the hard-coded arguments decide ------------------------------------
def fold_none_checks(graph: torch._C.Graph) -> None:
    """Fold ``x is None`` / ``x is not None`` where the types decide it (a ``None`` argument,
    or a value whose type cannot be None) and keep only the branch an ``if`` on it takes;
    an Optional tuple such as ``nn.LSTM``'s ``hx=None`` then lowers to plain values."""
    changed = True
    while changed:
        changed = False
        for node in graph.findAllNodes("aten::__is__") + graph.findAllNodes("aten::__isnot__"):
            known = [_none_ness(v) for v in node.inputs()]
            if None in known or not any(known):
                continue
            result = all(known) if node.kind() == "aten::__is__" else not all(known)
            with graph.insert_point_guard(node):
                node.output().replaceAllUsesWith(graph.insertConstant(result))
            node.destroy()
            changed = True
        for node in graph.findAllNodes("prim::If"):
            condition = node.inputsAt(0)
            if condition.node().kind() == "prim::Constant" and \
                    condition.type().kind() == "BoolType":
                _inline_branch(node, list(node.blocks())[0 if condition.toIValue() else 1])
                changed = True
                break


def _none_ness(value: torch._C.Value) -> bool | None:
    """True for None, False for a value that cannot be None, None when unknown."""
    kind = value.type().kind()
    if kind == "NoneType":
        return True
    return None if kind == "OptionalType" else False


def _inline_branch(if_node: torch._C.Node, block: torch._C.Block) -> None:
    for inner in list(block.nodes()):
        inner.moveBefore(if_node)
    for out, result in zip(list(if_node.outputs()), list(block.outputs())):
        out.replaceAllUsesWith(result)
    if_node.destroy()


# -- inputs torch.onnx reads at run time where oxport's conversion folds the reading -----
#: TorchScript's list builtins that change the list they take first.
_LIST_MUTATORS = ("aten::append", "aten::insert", "aten::add_", "aten::extend",
                  "aten::_set_item")


def runtime_read_inputs(graph: torch._C.Graph) -> set[int]:
    """The graph inputs (``unique()``) torch.onnx's file reads at run time where oxport's
    conversion decides the result at export: the condition of an ``if`` that has outputs
    and a branch that only raises (torch.onnx keeps that ``If``; oxport keeps the other
    branch; an ``If`` without outputs torch.onnx drops too), and the items
    of a list of tensors whose ``len()`` is taken (torch.onnx's ``SequenceLength``;
    oxport knows the list's items)."""
    roots = [node.inputsAt(0) for node in graph.findAllNodes("prim::If")
             if node.outputsSize() and _raising_branches(node)]
    roots += [node.inputsAt(0) for node in graph.findAllNodes("aten::len")
              if _is_tensor_list(node.inputsAt(0).type())]
    return _inputs_reaching(roots)


def _is_tensor_list(type_: torch._C.Type) -> bool:
    return type_.kind() == "ListType" and type_.getElementType().kind() == "TensorType"


def _inputs_reaching(roots: list[torch._C.Value]) -> set[int]:
    """The graph inputs ``roots`` are computed from (a list also from what its mutations
    put in)."""
    found: set[int] = set()
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        value = stack.pop()
        if value.unique() in seen:
            continue
        seen.add(value.unique())
        node = value.node()
        if node.kind() == "prim::Param":
            found.add(value.unique())
            continue
        stack.extend(node.inputs())
        if _is_tensor_list(value.type()):
            stack.extend(item for use in value.uses() if use.user.kind() in _LIST_MUTATORS
                         for item in use.user.inputs())
    return found
