"""Pooling: max and average pooling (1-3 d), with indices, adaptive pooling and max
unpooling; unbatched (C, *spatial) inputs pool with a batch axis of 1.

PyTorch's ``ceil_mode`` drops a last window that would start in the right
padding, so ceil and floor mode then agree. ONNX Runtime does the same, but
before opset 22 ONNX's shape inference (and so the checker) predicts one more
output there; so ``ceil_mode`` is left out where the static shape shows such a window
(the export warns if dynamic_axes lets that size vary), and where it would change one
axis while another axis drops such a window, the last windows are completed by padding
the end instead, in floor mode (a max pool whose end pads would reach the kernel's size,
which ONNX Runtime refuses, pads its input explicitly). Before opset 10, which has no
``ceil_mode``, that padding is the only way (static spatial sizes only).
"""

from __future__ import annotations

import functools
import math

import torch

from oxport import OpPack
from oxport import symbolic_helper as sh
from oxport.ir import Type, Value
from oxport.opsets.spatial import constant_pad

pack = OpPack("oxport.pooling", cases="oxport.opsets.cases.pooling")


def _expand(values: list[int], rank: int) -> list[int]:
    return values * rank if len(values) == 1 else values


def _torch_out(size: int, kernel: int, stride: int, pad: int, ceil: bool) -> int:
    out = (size + 2 * pad - kernel + (stride - 1 if ceil else 0)) // stride + 1
    if ceil and (out - 1) * stride >= size + pad:
        out -= 1
    return out


class _Window:
    """A pooling window's attributes, with PyTorch's defaults filled in."""

    def __init__(self, op: str, input: Value, kernel: list[int], stride: list[int],
                 padding: list[int], dilation: list[int] | None, ceil_mode: bool) -> None:
        n = len(kernel)
        self.op = op
        self.kernel = kernel
        self.stride = _expand(stride or kernel, n)
        self.padding = _expand(padding, n)
        self.dilation = _expand(dilation or [1], n)
        self.ceil_mode = bool(ceil_mode)
        sizes = sh._get_tensor_sizes(input)
        spatial = sizes[-n:] if sizes is not None and len(sizes) >= n else None
        self.spatial = spatial if spatial and all(s is not None for s in spatial) else None

    @property
    def effective_kernel(self) -> list[int]:
        return [d * (k - 1) + 1 for k, d in zip(self.kernel, self.dilation)]

    def torch_out(self, ceil: bool) -> list[int]:
        return [_torch_out(s, k, st, p, ceil) for s, k, st, p in
                zip(self.spatial, self.effective_kernel, self.stride, self.padding)]

    def ceil_matters(self) -> bool:
        """Whether ceil_mode changes the output (True when shapes are unknown)."""
        return self.ceil_mode and (self.spatial is None or
                                   self.torch_out(True) != self.torch_out(False))

    def ceil_needs_end_pads(self, opset: int) -> bool:
        """Whether ceil mode must be end pads: before opset 10, or where ONNX's shape
        inference would count a last window that PyTorch drops (static sizes)."""
        if not self.ceil_matters() or self.spatial is None:
            return False
        if opset < 10:
            return True
        return self.onnx_ceil_out() != self.torch_out(True)

    def end_pads_fit(self) -> bool:
        """Whether ONNX Runtime takes :meth:`ceil_end_pads` as pool pads: only pads smaller
        than the kernel, which a dilated window's last one may need more than."""
        return all(pad < k for pad, k in zip(self.ceil_end_pads(), self.kernel))

    def onnx_ceil_out(self) -> list[int]:
        """The output size ONNX's shape inference gives ceil_mode (it keeps a last window
        starting in the padding, which PyTorch drops)."""
        return [(s + 2 * p - k + st - 1) // st + 1 for s, k, st, p in
                zip(self.spatial, self.effective_kernel, self.stride, self.padding)]

    def ceil_end_pads(self) -> list[int]:
        """End pads with which floor mode gives ceil mode's output: the padding plus what
        completes the last window (less than the kernel, as that window starts inside)."""
        return [p + max(0, (out - 1) * st + k - (s + 2 * p)) for s, k, st, p, out in
                zip(self.spatial, self.effective_kernel, self.stride, self.padding,
                    self.torch_out(True))]


def _unbatched(rank: int, fn):
    """``fn``, also for an unbatched (C, *spatial) input: pooled with a batch axis of 1,
    which its outputs lose again (ONNX pools take (N, C, *spatial) only)."""
    @functools.wraps(fn)
    def symbolic(g, input: Value, *args):
        if sh._get_tensor_rank(input) != rank + 1:
            return fn(g, input, *args)
        batched = sh._unsqueeze_helper(g, input, [0]).setType(
            Type.tensor(input.type().dtype(), (1, *input.type().symbolic_sizes())))
        result = fn(g, batched, *args)
        if isinstance(result, tuple):
            return tuple(None if r is None else sh._squeeze_helper(g, r, [0]) for r in result)
        return sh._squeeze_helper(g, result, [0])
    return symbolic


def _pool_attrs(g, input: Value, window: _Window) -> dict:
    """The pool's kernel, strides, dilations, pads and ceil_mode attributes; before opset
    10 (no ceil_mode, no dilations), or where ONNX's shape inference would count a last
    window PyTorch drops, ceil mode's last window is completed by end pads, worked out from
    the traced size (the export warns if dynamic_axes lets it vary)."""
    if g.opset < 10 and any(d != 1 for d in window.dilation):
        sh._onnx_opset_unsupported_detailed(window.op, g.opset, 10, "dilation other than 1")
    attrs = dict(kernel_shape_i=window.kernel, strides_i=window.stride,
                 pads_i=window.padding + window.padding)
    if any(d != 1 for d in window.dilation):
        attrs["dilations_i"] = window.dilation
    if not window.ceil_matters():
        if window.ceil_mode and window.spatial is not None:
            if g.opset >= 10 and window.onnx_ceil_out() == window.torch_out(True):
                attrs["ceil_mode_i"] = 1  # no change at the traced size; one at others
            else:
                _uses_traced_spatial_size(g, input, window, "choice of ceil_mode")
        return attrs
    if g.opset < 10 and window.spatial is None:
        sh._onnx_opset_unsupported_detailed(window.op, g.opset, 10, "ceil_mode=True on an "
                                                                    "input of dynamic size")
    if not window.ceil_needs_end_pads(g.opset):
        attrs["ceil_mode_i"] = 1
    else:
        attrs["pads_i"] = window.padding + window.ceil_end_pads()
        _uses_traced_spatial_size(g, input, window, "ceil_mode end padding")
    return attrs


def _uses_traced_spatial_size(g, input: Value, window: _Window, what: str) -> None:
    rank = sh._get_tensor_rank(input)
    for axis in range(rank - len(window.kernel), rank):
        g.uses_traced_size(input, axis, f"{window.op}'s {what}")


def _pad_spatial(g, input: Value, op: str, begins: list[int], ends: list[int],
                 value: float) -> Value:
    """``input`` padded by ``value`` before and after its trailing spatial axes."""
    pad = [width for begin, end in zip(reversed(begins), reversed(ends))
           for width in (begin, end)]
    return constant_pad(g, input, pad, value, op)


def _lowest(dtype: torch.dtype | None) -> float:
    """The value no max pool picks: -inf, or an integer type's least value."""
    if dtype is None or dtype.is_floating_point:
        return -math.inf
    return torch.iinfo(dtype).min


def _max_pool_input(g, input: Value, window: _Window) -> tuple[Value, dict]:
    """MaxPool's input and attributes. Where ceil mode's end pads would reach the kernel's
    size (a dilated window; ONNX Runtime refuses such pads), the input is padded with the
    lowest value instead and pooled unpadded."""
    attrs = _pool_attrs(g, input, window)
    if not window.ceil_needs_end_pads(g.opset) or window.end_pads_fit():
        return input, attrs
    n = len(window.kernel)
    padded = _pad_spatial(g, input, window.op, attrs["pads_i"][:n], attrs["pads_i"][n:],
                          _lowest(input.type().dtype()))
    attrs["pads_i"] = [0] * 2 * n
    return padded, attrs


def _max_pool(g, input: Value, window: _Window) -> Value:
    input, attrs = _max_pool_input(g, input, window)
    return g.op("MaxPool", input, **attrs)


def _spatial_indices(g, input: Value, indices: Value, rank: int) -> Value:
    """ONNX MaxPool indices (flat over N, C and space) -> PyTorch's (flat over space)."""
    n = rank - 2
    _, all_indices = g.op("MaxPool", input, kernel_shape_i=[1] * n, strides_i=[1] * n,
                          outputs=2)
    axes = list(range(2, rank))
    base = sh._slice_helper(g, all_indices, axes, [0] * n, [1] * n)
    return g.op("Sub", indices, base)


def _unpadded_indices(g, indices: Value, window: _Window) -> Value:
    """Indices flat over each plane of the input padded explicitly for ceil mode
    (:func:`_max_pool_input`) -> flat over the unpadded plane: each coordinate less its
    begin pad (static sizes)."""
    padded = [s + p + end for s, p, end in
              zip(window.spatial, window.padding, window.ceil_end_pads())]
    strides = [math.prod(window.spatial[axis + 1:]) for axis in range(len(padded))]

    def scalar(value: int) -> Value:
        return g.constant(torch.tensor(value, dtype=torch.int64))

    flat = None
    for axis, stride in enumerate(strides):
        coordinate = indices
        if axis + 1 < len(padded):
            coordinate = g.op("Div", coordinate, scalar(math.prod(padded[axis + 1:])))
        if axis > 0:  # the first axis's quotient is its coordinate already
            coordinate = g.op("Mod", coordinate, scalar(padded[axis]))
        term = coordinate if stride == 1 else g.op("Mul", coordinate, scalar(stride))
        flat = term if flat is None else g.op("Add", flat, term)
    offset = sum(begin * stride for begin, stride in zip(window.padding, strides))
    return g.op("Sub", flat, scalar(offset))


def _max_pool_with_indices(g, input: Value, window: _Window) -> tuple[Value, Value]:
    rank = sh._get_tensor_rank(input)
    if rank is None:
        sh._unimplemented(window.op, "indices of an input of unknown rank")
    pooled, attrs = _max_pool_input(g, input, window)
    out, indices = g.op("MaxPool", pooled, outputs=2, **attrs)
    indices = _spatial_indices(g, pooled, indices.setType(Type.tensor(torch.int64)), rank)
    if pooled is input:
        return out, indices
    return out, _unpadded_indices(g, indices, window)


def _avg_pool(g, input: Value, window: _Window, count_include_pad: bool,
              divisor_override: int | None = None) -> Value:
    attrs = _pool_attrs(g, input, window)
    if divisor_override is not None:
        if window.ceil_matters():
            sh._unimplemented(window.op, "divisor_override with ceil_mode windows that end "
                                         "outside the input")
        out = g.op("AveragePool", input, count_include_pad_i=1, **attrs)
        factor = math.prod(window.kernel) / divisor_override
        dtype = input.type().dtype() or torch.float32
        return g.op("Mul", out, g.constant(torch.tensor(factor, dtype=dtype)))
    if count_include_pad and window.ceil_needs_end_pads(g.opset):
        # PyTorch counts the padding, not the end pads completing the last window: the
        # padding is made explicit and the pool counts only what it reads.
        n = len(window.kernel)
        if any(window.padding):
            input = _pad_spatial(g, input, window.op, window.padding, window.padding, 0.0)
        pads = attrs["pads_i"]
        attrs["pads_i"] = [0] * n + [end - begin for begin, end in zip(pads, pads[n:])]
        count_include_pad = False
    return g.op("AveragePool", input, count_include_pad_i=int(count_include_pad), **attrs)


# -- max pool -----------------------------------------------------------------------
def _max_pool_nd(rank: int):
    name = f"max_pool{rank}d"

    @sh.parse_args("v", "is", "is", "is", "is", "i")
    def max_pool(g, input, kernel_size, stride, padding, dilation, ceil_mode):
        return _max_pool(g, input, _Window(f"aten::{name}", input, kernel_size, stride,
                                           padding, dilation, ceil_mode))
    max_pool.__name__ = name
    max_pool.__doc__ = (f"{name}(Tensor self, int[{rank}] kernel_size, int[{rank}] stride=[], "
                        f"int[{rank}] padding={[0] if rank == 1 else 0}, "
                        f"int[{rank}] dilation={[1] if rank == 1 else 1}, "
                        "bool ceil_mode=False) -> Tensor\n\n"
                        "MaxPool (dilation from opset 10; ceil_mode before 10 on static sizes).")
    return max_pool


def _max_pool_nd_with_indices(rank: int):
    name = f"max_pool{rank}d_with_indices"

    @sh.parse_args("v", "is", "is", "is", "is", "i")
    def max_pool_with_indices(g, input, kernel_size, stride, padding, dilation, ceil_mode):
        return _max_pool_with_indices(g, input, _Window(f"aten::{name}", input, kernel_size,
                                                        stride, padding, dilation, ceil_mode))
    max_pool_with_indices.__name__ = name
    max_pool_with_indices.__doc__ = (
        f"{name}(Tensor self, int[{rank}] kernel_size, int[{rank}] stride=[], "
        f"int[{rank}] padding={[0] if rank == 1 else 0}, "
        f"int[{rank}] dilation={[1] if rank == 1 else 1}, "
        "bool ceil_mode=False) -> (Tensor, Tensor)\n\n"
        "MaxPool's Indices output, made relative to each channel's plane as in PyTorch.")
    return max_pool_with_indices


for _rank in (1, 2, 3):
    pack.symbolic(f"aten::max_pool{_rank}d", since=7)(_unbatched(_rank, _max_pool_nd(_rank)))
    pack.symbolic(f"aten::max_pool{_rank}d_with_indices", since=8)(
        _unbatched(_rank, _max_pool_nd_with_indices(_rank)))


# -- average pool -------------------------------------------------------------------
@pack.symbolic("aten::avg_pool1d", since=7)
@functools.partial(_unbatched, 1)
@sh.parse_args("v", "is", "is", "is", "i", "i")
def avg_pool1d(g, input, kernel_size, stride, padding, ceil_mode, count_include_pad):
    """avg_pool1d(Tensor self, int[1] kernel_size, int[1] stride=[], int[1] padding=[0], bool ceil_mode=False, bool count_include_pad=True) -> Tensor

    AveragePool (ceil_mode before opset 10 on static sizes)."""
    return _avg_pool(g, input, _Window("aten::avg_pool1d", input, kernel_size, stride,
                                       padding, None, ceil_mode), count_include_pad)


def _avg_pool_nd(rank: int):
    name = f"avg_pool{rank}d"

    @sh.parse_args("v", "is", "is", "is", "i", "i", "i")
    def avg_pool(g, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                 divisor_override=None):
        window = _Window(f"aten::{name}", input, kernel_size, stride, padding, None, ceil_mode)
        return _avg_pool(g, input, window, count_include_pad, divisor_override)
    avg_pool.__name__ = name
    avg_pool.__doc__ = (f"{name}(Tensor self, int[{rank}] kernel_size, int[{rank}] stride=[], "
                        f"int[{rank}] padding=0, bool ceil_mode=False, "
                        "bool count_include_pad=True, int? divisor_override=None) -> Tensor\n\n"
                        "AveragePool; divisor_override scales the padded-count average.")
    return avg_pool


for _rank in (2, 3):
    pack.symbolic(f"aten::avg_pool{_rank}d", since=7)(_unbatched(_rank, _avg_pool_nd(_rank)))


# -- adaptive pools -------------------------------------------------------------------
def _adaptive_window(op: str, input: Value, output_size: list[int]) -> _Window | None:
    """The fixed window equal to adaptive pooling, or None for global pooling.

    PyTorch's adaptive window ``i`` spans ``[floor(i*in/out), ceil((i+1)*in/out))``;
    when every window has one size and the starts one stride, a fixed pool equals it.
    """
    n = len(output_size)
    if all(o == 1 for o in output_size):
        return None
    sizes = sh._get_tensor_sizes(input)
    spatial = sizes[-n:] if sizes is not None else None
    if spatial is None or any(s is None for s in spatial):
        sh._unimplemented(op, f"output size {output_size} (not global) on an input whose "
                              "spatial size is not static")
    kernel, stride = [], []
    for size, out in zip(spatial, output_size):
        starts = [i * size // out for i in range(out)]
        lengths = {-(-(i + 1) * size // out) - start for i, start in enumerate(starts)}
        steps = {b - a for a, b in zip(starts, starts[1:])} or {1}
        if len(lengths) != 1 or len(steps) != 1:
            sh._unimplemented(op, f"input size {size} to output size {out}: PyTorch's adaptive "
                                  "windows differ in size or stride there, so no fixed ONNX "
                                  "pool equals them")
        kernel.append(lengths.pop())
        stride.append(steps.pop())
    return _Window(op, input, kernel, stride, [0], None, False)


def _pooled_size(g, op: str, input: Value, output_size: list[int]) -> list[int]:
    """``output_size`` with 1 where a spatial size of 1 grows: every window there is that
    one element, so pooling to 1 and then broadcasting (:func:`_grow`) equals it."""
    sizes = sh._get_tensor_sizes(input)
    spatial = sizes[-len(output_size):] if sizes is not None else [None] * len(output_size)
    pooled = [1 if size == 1 else out for size, out in zip(spatial, output_size)]
    if pooled != output_size and g.opset < 8:
        sh._onnx_opset_unsupported_detailed(op, g.opset, 8, "a spatial size of 1 grown by "
                                                            "adaptive pooling (Expand)")
    return pooled


def _grow(g, out: Value, input: Value, pooled_size: list[int], output_size: list[int]) -> Value:
    """Broadcast the pooled size-1 dims to ``output_size`` (Expand)."""
    if pooled_size == output_size:
        return out
    leading = [1] * (sh._get_tensor_rank(input) - len(output_size))
    return g.op("Expand", out, g.op("Constant", value_t=torch.tensor(leading + output_size)))


_PASS_THROUGH = {"aten::Int", "prim::NumToTensor", "aten::ScalarImplicit"}


def _output_size(g, op: str, input: Value, output_size: Value, rank: int) -> list[int]:
    """An adaptive pool's output size; an entry left ``None`` in ``F.adaptive_*_pool``
    records as ``input.size(d)``, which is read from the input's static shape."""
    static = sh._maybe_get_const(output_size, "is")
    if isinstance(static, list):
        return _expand(static, rank)
    node = g.original_node
    listed = node.inputsAt(1).node() if node is not None else None
    if listed is None or listed.kind() != "prim::ListConstruct":
        sh._unimplemented(op, "an output size computed at run time")
    sizes = sh._get_tensor_sizes(input) or []
    resolved = []
    for item in listed.inputs():
        producer = item.node()
        while producer.kind() in _PASS_THROUGH:
            producer = producer.inputsAt(0).node()
        if producer.kind() == "prim::Constant":
            resolved.append(int(producer.output().toIValue()))
            continue
        dim = producer.inputsAt(1).toIValue() if producer.kind() == "aten::size" and \
            producer.inputsAt(0).unique() == node.inputsAt(0).unique() else None
        if not isinstance(dim, int) or dim >= len(sizes) or sizes[dim] is None:
            sh._unimplemented(op, "an output size computed at run time")
        resolved.append(sizes[dim])
    return _expand(resolved, rank)


def _adaptive_avg_pool_nd(rank: int):
    name = f"adaptive_avg_pool{rank}d"

    def adaptive_avg_pool(g, input, output_size):
        op = f"aten::{name}"
        output_size = _output_size(g, op, input, output_size, rank)
        pooled_size = _pooled_size(g, op, input, output_size)
        window = _adaptive_window(op, input, pooled_size)
        if window is None:
            out = g.op("GlobalAveragePool", input)
        else:
            out = _avg_pool(g, input, window, False)
        return _grow(g, out, input, pooled_size, output_size)
    adaptive_avg_pool.__name__ = name
    size = "int[1]" if rank == 1 else f"SymInt[{rank}]"
    adaptive_avg_pool.__doc__ = (f"{name}(Tensor self, {size} output_size) -> Tensor\n\n"
                                 "GlobalAveragePool, or AveragePool when the adaptive windows "
                                 "are uniform.")
    return adaptive_avg_pool


def _adaptive_max_pool_nd(rank: int):
    name = f"adaptive_max_pool{rank}d"

    def adaptive_max_pool(g, input, output_size):
        op = f"aten::{name}"
        output_size = _output_size(g, op, input, output_size, rank)
        ts_outputs = list(g.original_node.outputs()) if g.original_node is not None else []
        wants_indices = len(ts_outputs) > 1 and bool(ts_outputs[1].uses())
        if not wants_indices:
            pooled_size = _pooled_size(g, op, input, output_size)
            window = _adaptive_window(op, input, pooled_size)
            out = g.op("GlobalMaxPool", input) if window is None else _max_pool(g, input, window)
            return _grow(g, out, input, pooled_size, output_size), None
        window = _adaptive_window(op, input, output_size)
        if window is None:
            sizes = sh._get_tensor_sizes(input)
            spatial = sizes[-rank:] if sizes is not None else None
            if spatial is None or any(s is None for s in spatial):
                sh._unimplemented(op, "indices of a global pool over a dynamic spatial size")
            window = _Window(op, input, spatial, spatial, [0], None, False)
        if g.opset < 8:
            sh._onnx_opset_unsupported_detailed(op, g.opset, 8, "return_indices=True")
        return _max_pool_with_indices(g, input, window)
    adaptive_max_pool.__name__ = name
    adaptive_max_pool.__doc__ = (f"{name}(Tensor self, int[{rank}] output_size) "
                                 "-> (Tensor, Tensor)\n\n"
                                 "GlobalMaxPool, or MaxPool when the adaptive windows are "
                                 "uniform (with indices when used).")
    return adaptive_max_pool


for _rank in (1, 2, 3):
    pack.symbolic(f"aten::adaptive_avg_pool{_rank}d", since=7)(
        _unbatched(_rank, _adaptive_avg_pool_nd(_rank)))
    pack.symbolic(f"aten::adaptive_max_pool{_rank}d", since=7)(
        _unbatched(_rank, _adaptive_max_pool_nd(_rank)))


# -- max unpool -----------------------------------------------------------------------
def _max_unpool(g, self: Value, indices: Value, output_size: Value, op: str) -> Value:
    """Each value scattered to its index in its plane's flattened output: PyTorch's indices
    count within each (N, C) plane, ONNX MaxUnpool's across the whole tensor."""
    sizes = sh._maybe_get_const(output_size, "is")
    rank = sh._get_tensor_rank(self)
    if not isinstance(sizes, list) or rank is None:
        sh._unimplemented(op, "a run-time output size or an input of unknown rank")
    lead = rank - len(sizes)
    dtype = self.type().dtype() or torch.float32
    leading = sh._slice_helper(g, g.op("Shape", self), [0], [0], [lead])
    flat = [0] * lead + [-1]
    zeros = g.op("ConstantOfShape", g.op("Concat", leading, g.constant(torch.tensor(
        [math.prod(sizes)])), axis_i=0), value_t=torch.zeros(1, dtype=dtype))
    out = g.op("ScatterElements", zeros, sh._reshape_helper(g, indices, flat),
               sh._reshape_helper(g, self, flat), axis_i=lead)
    return g.op("Reshape", out, g.op("Concat", leading, g.constant(torch.tensor(sizes)),
                                     axis_i=0))


@pack.symbolic("aten::max_unpool2d", since=11)
def max_unpool2d(g, self: Value, indices: Value, output_size: Value) -> Value:
    """max_unpool2d(Tensor self, Tensor indices, SymInt[2] output_size) -> Tensor

    nn.MaxUnpool1d/2d (F.max_unpool1d unpools a trailing axis of 1)."""
    return _max_unpool(g, self, indices, output_size, "aten::max_unpool2d")


@pack.symbolic("aten::max_unpool3d", since=11)
def max_unpool3d(g, self: Value, indices: Value, output_size: Value, *_: Value) -> Value:
    """max_unpool3d(Tensor self, Tensor indices, SymInt[3] output_size, int[3] stride, int[3] padding) -> Tensor"""
    return _max_unpool(g, self, indices, output_size, "aten::max_unpool3d")
