"""Spatial rearrangement: padding, upsampling, pixel shuffle, im2col/col2im, Tensor.unfold,
sampling grids (grid_sample, affine_grid).

Sizes that a traced graph computes at run time (``F.pad`` widths or
``interpolate(size=...)`` taken from another tensor's shape) stay run-time
values from opset 11, where Pad and Resize take them as inputs.
"""

from __future__ import annotations

import numpy as np
import torch

from oxport import OpPack
from oxport import symbolic_helper as sh
from oxport.ir import Value

pack = OpPack("oxport.spatial", cases="oxport.opsets.cases.spatial")

_INT_MAX = 2**62


# -- shared helpers -------------------------------------------------------------------
def _rank(input: Value, op: str) -> int:
    rank = sh._get_tensor_rank(input)
    if rank is None:
        sh._unimplemented(op, "an input of unknown rank")
    return rank


def _int_items(g, value: Value, op: str) -> list[int | Value]:
    """A list argument as Python ints, or Values where computed at run time (the items of a
    list a scripted model computes whole, like ``y.shape[-2:]``, are read from it)."""
    const = sh._maybe_get_const(value, "is")
    if isinstance(const, list):
        return const
    if sh._is_packed_list(value):
        return [sh._maybe_get_const(item, "i") for item in sh._unpack_list(value)]
    shape = value.type().shape if value.type().kind() == "TensorType" else None
    if shape is None or len(shape) != 1 or not isinstance(shape[0], int):
        sh._unimplemented(op, "a size list of unknown length")
    return [g.op("Gather", value, g.constant(torch.tensor(index)), axis_i=0)
            for index in range(shape[0])]


def _is_static(items: list[int | Value]) -> bool:
    return all(isinstance(item, int) for item in items)


def _int64_vector(g, items: list[int | Value]) -> Value:
    """A 1-D int64 tensor of ``items``: a constant, or a Concat of run-time scalars."""
    if _is_static(items):
        return g.constant(torch.tensor(items, dtype=torch.int64))
    parts = [g.constant(torch.tensor([item], dtype=torch.int64)) if isinstance(item, int)
             else sh._reshape_helper(g, sh.cast_to(g, item, torch.int64), [1])
             for item in items]
    return g.op("Concat", *parts, axis_i=0)


def _shape_slice(g, input: Value, start: int, end: int) -> Value:
    return sh._slice_helper(g, g.op("Shape", input), [0], [start], [end])


# -- padding --------------------------------------------------------------------------
_PAD_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge",
              "circular": "wrap"}


def _onnx_pads(pad: list[int | Value], rank: int, op: str) -> list[int | Value]:
    """PyTorch's (last_begin, last_end, prev_begin, ...) -> ONNX's begins then ends."""
    if len(pad) % 2 or len(pad) // 2 > rank:
        sh._unimplemented(op, f"a pad list of length {len(pad)} for a rank-{rank} input")
    padded = len(pad) // 2
    begins, ends = [0] * rank, [0] * rank
    for i in range(padded):
        begins[rank - 1 - i], ends[rank - 1 - i] = pad[2 * i], pad[2 * i + 1]
    return begins + ends


def _pad_value(g, input: Value, value: Value | float | None) -> Value:
    dtype = input.type().dtype() or torch.float32
    const = sh._maybe_get_const(value, "f") if isinstance(value, Value) else value
    if isinstance(const, Value):
        return sh.cast_to(g, const, dtype)
    return g.constant(torch.tensor(0 if const is None else const).to(dtype))


def _pad_attr(g, input: Value, pad: list[int | Value], mode: str, value: Value | float | None,
              op: str) -> Value:
    """Pad with attributes (opsets 7-10)."""
    rank = _rank(input, op)
    pads = _onnx_pads(pad, rank, op)
    if not _is_static(pads):
        sh._onnx_opset_unsupported_detailed(op, g.opset, 11, "pad widths computed at run time")
    if mode == "circular":
        return _circular(g, input, pad, op)
    attrs = {}
    if mode == "constant":
        dtype = input.type().dtype()
        if dtype is not None and not dtype.is_floating_point:
            sh._onnx_opset_unsupported_detailed(op, g.opset, 11, f"constant padding of {dtype}")
        const = sh._maybe_get_const(value, "f") if isinstance(value, Value) else value
        if isinstance(const, Value):
            sh._onnx_opset_unsupported_detailed(op, g.opset, 11, "a run-time pad value")
        attrs["value_f"] = const or 0.0
    return g.op("Pad", input, pads_i=pads, mode_s=_PAD_MODES[mode], **attrs)


def _pad_input(g, input: Value, pad: list[int | Value], mode: str,
               value: Value | float | None, op: str) -> Value:
    """Pad with pads (and the constant value) as inputs (opset 11 on)."""
    if mode == "circular":
        return _circular(g, input, pad, op)
    pads = _int64_vector(g, _onnx_pads(pad, _rank(input, op), op))
    if mode == "constant":
        return g.op("Pad", input, pads, _pad_value(g, input, value), mode_s="constant")
    return g.op("Pad", input, pads, mode_s=_PAD_MODES[mode])


def _pad_wrap(g, input: Value, pad: list[int | Value], mode: str,
              value: Value | float | None, op: str) -> Value:
    """Pad from opset 19, where circular padding is the 'wrap' mode: for run-time widths
    only, as ONNX Runtime (1.31) has no 'wrap' kernel."""
    if mode != "circular" or _is_static(pad):
        return _pad_input(g, input, pad, mode, value, op)
    pads = _int64_vector(g, _onnx_pads(pad, _rank(input, op), op))
    return g.op("Pad", input, pads, mode_s="wrap")


def _circular(g, input: Value, pad: list[int | Value], op: str) -> Value:
    """Circular padding as Slice + Concat along each padded dim (before Pad's 'wrap'): as
    PyTorch does, negative widths crop first, then positive ones wrap the cropped tensor."""
    if not _is_static(pad):
        sh._onnx_opset_unsupported_detailed(op, g.opset, 19,
                                            "circular padding by run-time widths")
    out = input
    for i in range(len(pad) // 2):
        axis, before, after = -1 - i, pad[2 * i], pad[2 * i + 1]
        if g.opset < 11:
            axis += _rank(input, op)
        if before < 0 or after < 0:
            out = sh._slice_helper(g, out, [axis], [max(0, -before)],
                                   [after if after < 0 else _INT_MAX])
        parts = [out]
        if before > 0:
            parts.insert(0, sh._slice_helper(g, out, [axis], [-before], [_INT_MAX]))
        if after > 0:
            parts.append(sh._slice_helper(g, out, [axis], [0], [after]))
        if len(parts) > 1:
            out = g.op("Concat", *parts, axis_i=axis)
    return out


def constant_pad(g, input: Value, pad: list[int], value: float, op: str) -> Value:
    """``input`` padded with ``value`` by PyTorch's ``pad`` list (last dim first), as the
    opset's Pad takes it."""
    emit = _pad_attr if g.opset < 11 else _pad_input
    return emit(g, input, pad, "constant", value, op)


def _register_pad(name: str, mode: str | None, ladder=((7, _pad_attr), (11, _pad_input))):
    """``aten::name`` (a fixed ``mode``, or aten::pad's own) at each opset of ``ladder``."""
    op = f"aten::{name}"
    if mode is None:
        signature = f'{name}(Tensor self, SymInt[] pad, str mode="constant", float? value=None)'
    elif mode == "constant":
        signature = f"{name}(Tensor self, SymInt[] pad, Scalar value=0)"
    else:
        signature = f"{name}(Tensor self, SymInt[{2 * int(name[-2])}] padding)"

    def build(pad_fn):
        def symbolic(g, input, pad, *args):
            pad_mode, value = mode, None
            if mode is None:  # aten::pad(input, pad, mode, value)
                pad_mode = sh._maybe_get_const(args[0], "s") if args else "constant"
                value = args[1] if len(args) > 1 else None
            elif mode == "constant" and args:  # constant_pad_nd(input, pad, value)
                value = args[0]
            if pad_mode not in _PAD_MODES:
                sh._unimplemented(op, f"padding mode {pad_mode!r}")
            return pad_fn(g, input, _int_items(g, pad, op), pad_mode, value, op)
        symbolic.__name__ = name
        symbolic.__doc__ = f"{signature} -> Tensor\n\nAs ONNX Pad."
        return symbolic

    for since, pad_fn in ladder:
        pack.symbolic(op, since=since)(build(pad_fn))


_register_pad("pad", None, ((7, _pad_attr), (11, _pad_input), (19, _pad_wrap)))
_register_pad("constant_pad_nd", "constant")
for _rank_n in (1, 2, 3):
    _register_pad(f"reflection_pad{_rank_n}d", "reflect")
    _register_pad(f"replication_pad{_rank_n}d", "replicate")


# -- affine grids -------------------------------------------------------------------------
def _base_grid(size: list[int], align_corners: bool) -> torch.Tensor:
    """Every output position's normalized coordinates (x, y[, z], 1), x fastest, flattened:
    [positions, spatial + 1]."""
    def steps(n: int) -> torch.Tensor:
        if n == 1:
            return torch.zeros(1, dtype=torch.float64)
        ramp = torch.linspace(-1, 1, n, dtype=torch.float64)
        return ramp if align_corners else ramp * (n - 1) / n
    axes = torch.meshgrid(*[steps(n) for n in size[2:]], indexing="ij")  # slowest first
    coordinates = [a.reshape(-1) for a in reversed(axes)]  # x first, as torch orders them
    return torch.stack([*coordinates, torch.ones_like(coordinates[0])], dim=1)


@pack.symbolic("aten::affine_grid_generator", since=9)
@sh.parse_args("v", "is", "b")
def affine_grid_generator(g, theta, size, align_corners):
    """affine_grid_generator(Tensor theta, SymInt[] size, bool align_corners) -> Tensor

    A constant grid of output coordinates (``size`` is static) times ``theta``
    transposed: MatMul [N, positions, spatial]."""
    dtype = theta.type().dtype() or torch.float32
    base = g.constant(_base_grid(size, align_corners).to(dtype))
    grid = g.op("MatMul", base, g.op("Transpose", theta, perm_i=[0, 2, 1]))
    return sh._reshape_helper(g, grid, g.constant(torch.tensor(
        [-1, *size[2:], len(size) - 2], dtype=torch.int64)))


@pack.symbolic("aten::affine_grid_generator", since=20)
def affine_grid_generator_20(g, theta: Value, size: Value, align_corners: Value) -> Value:
    """affine_grid_generator(Tensor theta, SymInt[] size, bool align_corners) -> Tensor

    ``F.affine_grid`` as ONNX AffineGrid (opset 20) for a size computed at run time; a
    static size keeps the constant grid (ONNX Runtime's AffineGrid puts a spatial size of 1
    at -1 with align_corners, PyTorch at 0)."""
    if sh._is_constant(size):
        return affine_grid_generator(g, theta, size, align_corners)
    return g.op("AffineGrid", theta, _int64_vector(g, _int_items(g, size, "aten::affine_grid")),
                align_corners_i=int(sh._get_const(align_corners, "b", "align_corners")))


# -- upsampling -----------------------------------------------------------------------
class _Resample:
    """What an ``aten::upsample_*`` node asks for: output sizes or scale factors."""

    def __init__(self, g, op: str, input: Value, spatial: int, output_size: Value | None,
                 scales: tuple[Value, ...]) -> None:
        self.op = op
        self.input = input
        self.spatial = spatial
        self.sizes: list[int | Value] | None = None
        self.scales: list[float] | None = None
        #: Scale factors computed at run time: a 1-D tensor, one per spatial dim.
        self.scale_tensor: Value | None = None
        if not sh._is_none(output_size):
            self.sizes = _int_items(g, output_size, op)
        elif len(scales) == 1 and self._run_time_vector(scales[0]):
            self.scale_tensor = scales[0]
        else:
            self.scales = self._parse_scales(scales)

    def _run_time_vector(self, scale: Value) -> bool:
        """Whether ``scale`` is the .vec overload's scale_factors as a 1-D tensor computed at
        run time (a scripted list comprehension the walker turned into a Loop)."""
        sizes = scale.type().varyingSizes() if sh._is_tensor(scale) else None
        return not scale.is_const and sizes is not None and len(sizes) == 1 \
            and sizes[0] in (None, self.spatial)

    def _parse_scales(self, scales: tuple[Value, ...]) -> list[float]:
        # The .vec overload passes one float[] (scale_factors); others one float per dim.
        values: list = []
        for scale in scales:
            const = sh._maybe_get_const(scale, "fs")
            if isinstance(const, Value) or const is None:
                sh._unimplemented(self.op, "scale factors computed at run time, not as "
                                           "one 1-D tensor")
            values.extend(const)
        if len(values) == 1:
            values = values * self.spatial
        if len(values) != self.spatial:
            sh._unimplemented(self.op, "neither an output size nor a scale per spatial dim")
        return values

    def input_sizes(self) -> list[int] | None:
        sizes = sh._get_tensor_sizes(self.input)
        spatial = sizes[-self.spatial:] if sizes is not None else None
        return spatial if spatial and all(s is not None for s in spatial) else None

    def static_scales(self) -> list[float] | None:
        """Scale factors (output / input), exact enough that floor(in * s) == out."""
        if self.scale_tensor is not None:
            return None
        if self.scales is not None:
            return self.scales
        in_sizes = self.input_sizes()
        if in_sizes is None or not _is_static(self.sizes):
            return None
        scales = []
        for size, out in zip(in_sizes, self.sizes):
            scale = np.float32(out / size)
            while np.floor(np.float32(size) * scale) < out:
                scale = np.nextafter(scale, np.float32(np.inf))
            scales.append(float(scale))
        return scales

    def scales_input(self, g) -> Value:
        """Full-rank float scales as a Value (from sizes at run time when needed)."""
        static = self.static_scales()
        if static is not None:
            return g.constant(torch.tensor([1.0, 1.0, *static], dtype=torch.float32))
        if self.scale_tensor is not None:
            return g.op("Concat", g.constant(torch.ones(2)),
                        sh.cast_to(g, self.scale_tensor, torch.float32), axis_i=0)
        rank = 2 + self.spatial
        out = sh.cast_to(g, _int64_vector(g, self.sizes), torch.float32)
        size = sh.cast_to(g, _shape_slice(g, self.input, 2, rank), torch.float32)
        return g.op("Concat", g.constant(torch.ones(2)), g.op("Div", out, size), axis_i=0)


def _upsample_7(g, resample: _Resample) -> Value:
    """Upsample with a scales attribute (opsets 7-8; nearest only)."""
    scales = resample.static_scales()
    if scales is None:
        sh._onnx_opset_unsupported_detailed(resample.op, g.opset, 9, "a run-time output size")
    if any(s < 1 for s in scales):
        sh._onnx_opset_unsupported_detailed(resample.op, g.opset, 10,
                                            "downsampling (Upsample only enlarges)")
    return g.op("Upsample", resample.input, scales_f=[1.0, 1.0, *scales], mode_s="nearest")


def _upsample_9(g, resample: _Resample) -> Value:
    """Upsample with a scales input (opset 9; nearest only)."""
    scales = resample.static_scales()
    if scales is not None and any(s < 1 for s in scales):
        sh._onnx_opset_unsupported_detailed(resample.op, g.opset, 10,
                                            "downsampling (Upsample only enlarges)")
    return g.op("Upsample", resample.input, resample.scales_input(g), mode_s="nearest")


def _resize_10(g, resample: _Resample) -> Value:
    """Resize-10: nearest with asymmetric coordinates, scales only.

    ONNX Runtime rounds (rather than floors) source coordinates when Resize-10
    downsamples, which equals PyTorch only for integer factors.
    """
    scales = resample.static_scales()
    if scales is not None and any(s < 1 and not float(1 / s).is_integer() for s in scales):
        sh._onnx_opset_unsupported_detailed(resample.op, g.opset, 11,
                                            "downsampling by a non-integer factor")
    return g.op("Resize", resample.input, resample.scales_input(g), mode_s="nearest")


def _linear_weights(size: int, out: int, align_corners: bool, scale: float | None
                    ) -> np.ndarray:
    """The (out, size) matrix of PyTorch's linear interpolation along one axis: each output
    mixes the two inputs around its source coordinate (half-pixel, clamped at 0, or
    align_corners); a scale factor the call gave sets the spacing, as in PyTorch."""
    if align_corners:
        source = np.arange(out) * ((size - 1) / (out - 1) if out > 1 else 0.0)
    else:
        spacing = 1.0 / scale if scale else size / out
        source = np.maximum((np.arange(out) + 0.5) * spacing - 0.5, 0.0)
    low = np.minimum(np.floor(source).astype(np.int64), size - 1)
    high = np.minimum(low + 1, size - 1)
    fraction = source - low
    weights = np.zeros((out, size))
    np.add.at(weights, (np.arange(out), low), 1.0 - fraction)
    np.add.at(weights, (np.arange(out), high), fraction)
    return weights


def _linear_by_matmul(g, resample: _Resample, align_corners: bool) -> Value:
    """Linear (1-3 d) resampling as one MatMul per spatial axis with constant weights (for
    opsets before 11, whose Upsample and Resize-10 have no half-pixel or align_corners
    coordinates): needs static input and output sizes."""
    sizes = resample.input_sizes()
    if sizes is None or resample.scale_tensor is not None or (
            resample.sizes is not None and not _is_static(resample.sizes)):
        sh._onnx_opset_unsupported_detailed(resample.op, g.opset, 11,
                                            "linear resampling to a run-time size")
    rank = 2 + resample.spatial
    for axis in range(2, rank):
        g.uses_traced_size(resample.input, axis, f"{resample.op}'s interpolation weights")
    scales = resample.scales or [None] * resample.spatial
    outs = resample.sizes or [int(np.floor(size * scale)) for size, scale in zip(sizes, scales)]
    dtype = resample.input.type().dtype() or torch.float32
    x = resample.input
    for i in reversed(range(resample.spatial)):
        weights = torch.tensor(_linear_weights(sizes[i], outs[i], align_corners, scales[i]),
                               dtype=dtype)
        if i == resample.spatial - 1:  # (..., W) @ (W, W')
            x = g.op("MatMul", x, g.constant(weights.t().contiguous()))
        elif i == resample.spatial - 2:  # (H', H) @ (..., H, W')
            x = g.op("MatMul", g.constant(weights), x)
        else:  # depth: (D', D) @ (N, C, D, H' * W'), then H' and W' apart again
            flat = sh._reshape_helper(g, x, [0, 0, sizes[i], -1])
            x = sh._reshape_helper(g, g.op("MatMul", g.constant(weights), flat),
                                   [0, 0, *outs[i:]])
    return x


def _resize_11(g, resample: _Resample, mode: str, align_corners: bool | None = None,
               antialias: bool = False) -> Value:
    """Resize with PyTorch's coordinate mapping (opset 11 on)."""
    attrs: dict = {}
    if mode == "nearest":
        attrs = dict(mode_s="nearest", coordinate_transformation_mode_s="asymmetric",
                     nearest_mode_s="floor")
    elif mode == "nearest-exact":
        attrs = dict(mode_s="nearest", coordinate_transformation_mode_s="half_pixel",
                     nearest_mode_s="round_prefer_ceil")
    else:
        attrs = dict(mode_s=mode, coordinate_transformation_mode_s=(
            "align_corners" if align_corners else "half_pixel"))
        if mode == "cubic":  # antialiased bicubic uses PIL's a = -0.5
            attrs["cubic_coeff_a_f"] = -0.5 if antialias else -0.75
    if antialias:
        attrs.update(antialias_i=1, exclude_outside_i=1)
    empty = g.constant(torch.tensor([], dtype=torch.float32))
    roi = empty if g.opset < 13 else None
    if resample.sizes is None:
        return g.op("Resize", resample.input, roi, resample.scales_input(g), **attrs)
    scales = empty if g.opset < 13 else None
    rank = 2 + resample.spatial
    if g.opset >= 18:
        sizes = _int64_vector(g, resample.sizes)
        attrs["axes_i"] = list(range(2, rank))
    else:
        sizes = g.op("Concat", _shape_slice(g, resample.input, 0, 2),
                     _int64_vector(g, resample.sizes), axis_i=0)
    return g.op("Resize", resample.input, roi, scales, sizes, **attrs)


def _register_nearest(name: str, spatial: int) -> None:
    op = f"aten::{name}"
    for since, build in ((7, _upsample_7), (9, _upsample_9), (10, _resize_10),
                         (11, lambda g, r: _resize_11(g, r, "nearest"))):
        def symbolic(g, input, output_size, *scales, _build=build):
            return _build(g, _Resample(g, op, input, spatial, output_size, scales))
        symbolic.__name__ = name
        symbolic.__doc__ = f"{_resample_schema(name, spatial)}\n\nNearest (floor) resampling."
        pack.symbolic(op, since=since)(symbolic)


def _resample_schema(name: str, spatial: int, align_corners: bool = False) -> str:
    """The schemas of ``aten::name`` and its ``.vec`` overload, for a docstring."""
    scales = ["scales"] if spatial == 1 else ["scales_d", "scales_h", "scales_w"][-spatial:]
    corners = "bool align_corners, " if align_corners else ""
    return (f"{name}(Tensor self, SymInt[{spatial}] output_size, {corners}"
            + ", ".join(f"float? {s}=None" for s in scales) + ") -> Tensor\n"
            f"{name}.vec(Tensor input, SymInt[]? output_size, {corners}"
            "float[]? scale_factors) -> Tensor")


def _register_linear_by_matmul(name: str, spatial: int) -> None:
    op = f"aten::{name}"

    def symbolic(g, input, output_size, align_corners, *scales):
        return _linear_by_matmul(g, _Resample(g, op, input, spatial, output_size, scales),
                                 bool(sh._get_const(align_corners, "b", "align_corners")))
    symbolic.__name__ = name
    symbolic.__doc__ = (f"{_resample_schema(name, spatial, align_corners=True)}\n\n"
                        "A MatMul per spatial axis (static sizes).")
    pack.symbolic(op, since=7)(symbolic)


def _register_resize(name: str, spatial: int, mode: str, since: int = 11,
                     antialias: bool = False) -> None:
    op = f"aten::{name}"
    has_align = mode in ("linear", "cubic")

    def symbolic(g, input, output_size, *args):
        align_corners = sh._maybe_get_const(args[0], "b") if has_align else None
        scales = args[1:] if has_align else args
        return _resize_11(g, _Resample(g, op, input, spatial, output_size, scales), mode,
                          align_corners, antialias)
    symbolic.__name__ = name
    symbolic.__doc__ = (f"{_resample_schema(name, spatial, align_corners=has_align)}\n\n"
                        f"Resize (mode {mode!r}).")
    pack.symbolic(op, since=since)(symbolic)


_NEAREST_LADDER = ((11, lambda g, r: _resize_11(g, r, "nearest")), (10, _resize_10),
                   (9, _upsample_9), (7, _upsample_7))
_INTERPOLATE_MODES = {"linear": "linear", "bilinear": "linear", "trilinear": "linear",
                      "bicubic": "cubic", "nearest-exact": "nearest-exact"}


@pack.symbolic("aten::__interpolate", since=7)
def __interpolate(g, input: Value, size: Value, scale_factor: Value, mode: Value,
                  align_corners: Value, recompute_scale_factor: Value,
                  antialias: Value | None = None) -> Value:
    """__interpolate(Tensor input, int? size=None, float? scale_factor=None, str mode="nearest", bool? align_corners=None, bool? recompute_scale_factor=None, bool antialias=False) -> Tensor
    __interpolate.scale_list(Tensor input, int? size=None, float[]? scale_factor=None, str mode="nearest", bool? align_corners=None, bool? recompute_scale_factor=None, bool antialias=False) -> Tensor
    __interpolate.size_list_scale_list(Tensor input, int[]? size=None, float[]? scale_factor=None, str mode="nearest", bool? align_corners=None, bool? recompute_scale_factor=None, bool antialias=False) -> Tensor
    __interpolate.size_list(Tensor input, int[]? size=None, float? scale_factor=None, str mode="nearest", bool? align_corners=None, bool? recompute_scale_factor=None, bool antialias=False) -> Tensor

    ``F.interpolate`` as TorchScript's builtin (which has no antialiasing): what the
    matching ``upsample_*`` exports (nearest and linear from opset 7, the others from 11)."""
    op = "aten::__interpolate"
    spatial = _rank(input, op) - 2
    name = sh._get_const(mode, "s", "mode")
    if antialias is not None and not sh._is_none(antialias) and \
            sh._get_const(antialias, "b", "antialias"):
        sh._unimplemented(op, "antialias=True (TorchScript's builtin refuses it too)")
    if size.is_const and isinstance(size.const, int):  # the int overload: every dim
        size = g.python_constant([size.const] * spatial)
    resample = _Resample(g, op, input, spatial, size, () if sh._is_none(scale_factor) else
                         (scale_factor,))
    if name == "nearest":
        build = next(build for since, build in _NEAREST_LADDER if g.opset >= since)
        return build(g, resample)
    if name not in _INTERPOLATE_MODES:
        sh._unimplemented(op, f"mode={name!r}")
    corners = None if sh._is_none(align_corners) else sh._get_const(align_corners, "b",
                                                                     "align_corners")
    if g.opset < 11 and _INTERPOLATE_MODES[name] == "linear":
        return _linear_by_matmul(g, resample, bool(corners))
    if g.opset < 11:
        sh._onnx_opset_unsupported_detailed(op, g.opset, 11, f"mode={name!r}")
    return _resize_11(g, resample, _INTERPOLATE_MODES[name], corners)


for _n in (1, 2, 3):
    _register_nearest(f"upsample_nearest{_n}d", _n)
    _register_resize(f"_upsample_nearest_exact{_n}d", _n, "nearest-exact")
for _n, _name in ((1, "upsample_linear1d"), (2, "upsample_bilinear2d"),
                  (3, "upsample_trilinear3d")):
    _register_linear_by_matmul(_name, _n)
    _register_resize(_name, _n, "linear")
_register_resize("upsample_bicubic2d", 2, "cubic")
_register_resize("_upsample_bilinear2d_aa", 2, "linear", since=18, antialias=True)
_register_resize("_upsample_bicubic2d_aa", 2, "cubic", since=18, antialias=True)


# -- pixel shuffle ----------------------------------------------------------------------
def _rearrange(g, input: Value, factor: int, op: str, shuffle: bool) -> Value:
    """Pixel (un)shuffle as Reshape -> Transpose -> Reshape, for any leading dims; every
    size is read at run time (the channels too)."""
    rank = _rank(input, op)
    lead = rank - 3
    leading = _shape_slice(g, input, 0, lead) if lead else None
    channels = _shape_slice(g, input, rank - 3, rank - 2)
    height_width = _shape_slice(g, input, rank - 2, rank)
    r = g.constant(torch.tensor([factor], dtype=torch.int64))
    area = g.constant(torch.tensor([factor * factor], dtype=torch.int64))
    if shuffle:
        c = g.op("Div", channels, area)
        split = [c, r, r, height_width]
        perm = [0, 3, 1, 4, 2]
        merged = [c, g.op("Mul", height_width, r)]
    else:
        hw = g.op("Div", height_width, r)
        h = sh._slice_helper(g, hw, [0], [0], [1])
        w = sh._slice_helper(g, hw, [0], [1], [2])
        split = [channels, h, r, w, r]
        perm = [0, 2, 4, 1, 3]
        merged = [g.op("Mul", channels, area), hw]
    if leading is not None:
        split.insert(0, leading)
        merged.insert(0, leading)
    expanded = g.op("Reshape", input, g.op("Concat", *split, axis_i=0))
    moved = g.op("Transpose", expanded, perm_i=list(range(lead)) + [lead + p for p in perm])
    return g.op("Reshape", moved, g.op("Concat", *merged, axis_i=0))


@pack.symbolic("aten::pixel_shuffle", since=7)
@sh.parse_args("v", "i")
def pixel_shuffle(g, self, upscale_factor):
    """pixel_shuffle(Tensor self, int upscale_factor) -> Tensor

    Reshape-Transpose-Reshape (DepthToSpace has PyTorch's channel order only from 11)."""
    return _rearrange(g, self, upscale_factor, "aten::pixel_shuffle", shuffle=True)


@pack.symbolic("aten::pixel_shuffle", since=11)
@sh.parse_args("v", "i")
def pixel_shuffle_11(g, self, upscale_factor):
    """pixel_shuffle(Tensor self, int upscale_factor) -> Tensor

    DepthToSpace in CRD mode for 4-D inputs."""
    if sh._get_tensor_rank(self) == 4:
        return g.op("DepthToSpace", self, blocksize_i=upscale_factor, mode_s="CRD")
    return _rearrange(g, self, upscale_factor, "aten::pixel_shuffle", shuffle=True)


@pack.symbolic("aten::pixel_unshuffle", since=7)
@sh.parse_args("v", "i")
def pixel_unshuffle(g, self, downscale_factor):
    """pixel_unshuffle(Tensor self, int downscale_factor) -> Tensor

    Reshape-Transpose-Reshape (SpaceToDepth orders channels differently)."""
    return _rearrange(g, self, downscale_factor, "aten::pixel_unshuffle", shuffle=False)


@pack.symbolic("aten::channel_shuffle", since=7)
@sh.parse_args("v", "i")
def channel_shuffle(g, self, groups):
    """channel_shuffle(Tensor self, SymInt groups) -> Tensor
    native_channel_shuffle(Tensor self, SymInt groups) -> Tensor

    (N, g, C/g, rest) -> (N, C/g, g, rest) -> back to the input's shape."""
    channels = sh._get_tensor_dim_size(self, 1)
    if channels is None:
        sh._unimplemented("aten::channel_shuffle", "a channel dimension that is not static")
    grouped = sh._reshape_helper(g, self, [0, groups, channels // groups, -1])
    swapped = g.op("Transpose", grouped, perm_i=[0, 2, 1, 3])
    return g.op("Reshape", swapped, g.op("Shape", self))


pack.alias(channel_shuffle, "aten::native_channel_shuffle", since=7)


# -- im2col / col2im -------------------------------------------------------------------
@pack.symbolic("aten::im2col", since=7)
@sh.parse_args("v", "is", "is", "is", "is")
def im2col(g, self, kernel_size, dilation, padding, stride):
    """im2col(Tensor self, int[2] kernel_size, int[2] dilation, int[2] padding, int[2] stride) -> Tensor

    A grouped Conv with one-hot kernels picks each patch element, in PyTorch's order."""
    rank = _rank(self, "aten::im2col")
    channels = sh._get_tensor_dim_size(self, -3)
    if channels is None:
        sh._unimplemented("aten::im2col", "a channel dimension that is not static")
    kh, kw = kernel_size
    picks = torch.eye(kh * kw, dtype=self.type().dtype() or torch.float32)
    weight = picks.reshape(kh * kw, 1, kh, kw).repeat(channels, 1, 1, 1)
    batched = sh._unsqueeze_helper(g, self, [0]) if rank == 3 else self
    patches = g.op("Conv", batched, g.constant(weight), kernel_shape_i=kernel_size,
                   dilations_i=dilation, pads_i=padding + padding, strides_i=stride,
                   group_i=channels)
    out = sh._reshape_helper(g, patches, [0, 0, -1])
    return sh._squeeze_helper(g, out, [0]) if rank == 3 else out


@pack.symbolic("aten::col2im", since=7)
@sh.parse_args("v", "v", "is", "is", "is", "is")
def col2im_7(g, self, output_size, kernel_size, dilation, padding, stride):
    """col2im(Tensor self, SymInt[2] output_size, int[2] kernel_size, int[2] dilation, int[2] padding, int[2] stride) -> Tensor

    The adjoint of im2col's one-hot Conv: a grouped ConvTranspose with the same kernels
    adds each patch element back at its place (static sizes; Col2Im from 18)."""
    rank = _rank(self, "aten::col2im")
    size, rows = _int_items(g, output_size, "aten::col2im"), sh._get_tensor_dim_size(self, -2)
    if not _is_static(size) or rows is None:
        sh._onnx_opset_unsupported_detailed("aten::col2im", g.opset, 18,
                                            "a run-time output size or number of rows")
    kh, kw = kernel_size
    reach = [d * (k - 1) + 1 for d, k in zip(dilation, kernel_size)]
    blocks = [(n + 2 * p - r) // s + 1 for n, p, r, s in zip(size, padding, reach, stride)]
    # The rows and columns no block reaches, as ConvTranspose's output_padding.
    rest = [n + 2 * p - ((b - 1) * s + r)
            for n, p, r, s, b in zip(size, padding, reach, stride, blocks)]
    picks = torch.eye(kh * kw, dtype=self.type().dtype() or torch.float32)
    weight = picks.reshape(kh * kw, 1, kh, kw).repeat(rows // (kh * kw), 1, 1, 1)
    batched = sh._unsqueeze_helper(g, self, [0]) if rank == 2 else self
    grid = sh._reshape_helper(g, batched, [0, rows, *blocks])
    out = g.op("ConvTranspose", grid, g.constant(weight), kernel_shape_i=kernel_size,
               dilations_i=dilation, pads_i=padding + padding, strides_i=stride,
               group_i=rows // (kh * kw), output_padding_i=rest)
    return sh._squeeze_helper(g, out, [0]) if rank == 2 else out


@pack.symbolic("aten::col2im", since=18)
@sh.parse_args("v", "v", "is", "is", "is", "is")
def col2im(g, self, output_size, kernel_size, dilation, padding, stride):
    """col2im(Tensor self, SymInt[2] output_size, int[2] kernel_size, int[2] dilation, int[2] padding, int[2] stride) -> Tensor

    Col2Im (opset 18); unbatched input gets a batch axis for it."""
    unbatched = _rank(self, "aten::col2im") == 2
    out = g.op("Col2Im", sh._unsqueeze_helper(g, self, [0]) if unbatched else self,
               _int64_vector(g, _int_items(g, output_size, "aten::col2im")),
               g.constant(torch.tensor(kernel_size, dtype=torch.int64)),
               dilations_i=dilation, pads_i=padding + padding, strides_i=stride)
    return sh._squeeze_helper(g, out, [0]) if unbatched else out


# -- Tensor.unfold ---------------------------------------------------------------------
def _unfold(g, input: Value, dimension: int, index: Value) -> Value:
    """Gather the (windows, size) ``index`` along ``dimension``; window elements go last."""
    rank = _rank(input, "aten::unfold")
    axis = dimension % rank
    windows = g.op("Gather", input, index, axis_i=axis)
    perm = [*range(axis + 1), *range(axis + 2, rank + 1), axis + 1]
    return g.op("Transpose", windows, perm_i=perm)


@pack.symbolic("aten::unfold", since=7)
@sh.parse_args("v", "i", "i", "i")
def unfold(g, input, dimension, size, step):
    """unfold(Tensor(a) self, int dimension, int size, int step) -> Tensor(a)

    Sliding windows with constant indices (needs a static size along ``dimension``)."""
    length = sh._get_tensor_dim_size(input, dimension)
    if length is None:
        sh._onnx_opset_unsupported_detailed("aten::unfold", g.opset, 11,
                                            "a dimension of run-time size")
    starts = torch.arange(0, length - size + 1, step)
    index = starts.unsqueeze(1) + torch.arange(size).unsqueeze(0)
    return _unfold(g, input, dimension, g.constant(index))


@pack.symbolic("aten::unfold", since=11)
@sh.parse_args("v", "i", "i", "i")
def unfold_11(g, input, dimension, size, step):
    """unfold(Tensor(a) self, int dimension, int size, int step) -> Tensor(a)

    Sliding windows with indices computed from the run-time length (Range)."""
    zero = g.constant(torch.tensor(0))
    length = g.op("Gather", g.op("Shape", input), g.constant(torch.tensor(dimension)), axis_i=0)
    last_start = g.op("Sub", length, g.constant(torch.tensor(size - 1)))
    starts = g.op("Range", zero, last_start, g.constant(torch.tensor(step)))
    offsets = g.constant(torch.arange(size).unsqueeze(0))
    index = g.op("Add", sh._unsqueeze_helper(g, starts, [1]), offsets)
    return _unfold(g, input, dimension, index)


# -- sampling grids -----------------------------------------------------------------------
_GRID_MODES = ("bilinear", "nearest", "bicubic")  # torch's interpolation_mode enum order
_GRID_PADDING = ("zeros", "border", "reflection")  # and padding_mode's


def _grid_sample(g, input: Value, grid: Value, mode: int, padding_mode: int,
                 align_corners: bool, names: tuple[str, ...]) -> Value:
    return g.op("GridSample", input, grid, mode_s=names[mode],
                padding_mode_s=_GRID_PADDING[padding_mode], align_corners_i=int(align_corners))


@pack.symbolic("aten::grid_sampler", since=16)
@sh.parse_args("v", "v", "i", "i", "b")
def grid_sampler(g, input, grid, interpolation_mode, padding_mode, align_corners):
    """grid_sampler(Tensor input, Tensor grid, int interpolation_mode, int padding_mode, bool align_corners) -> Tensor

    GridSample over a 4-D input (volumetric 5-D inputs from opset 20)."""
    if _rank(input, "aten::grid_sampler") != 4:
        sh._onnx_opset_unsupported_detailed("aten::grid_sampler", g.opset, 20,
                                            "GridSample over a 5-D (volumetric) input")
    return _grid_sample(g, input, grid, interpolation_mode, padding_mode, align_corners,
                        _GRID_MODES)


@pack.symbolic("aten::grid_sampler", since=20)
@sh.parse_args("v", "v", "i", "i", "b")
def grid_sampler_20(g, input, grid, interpolation_mode, padding_mode, align_corners):
    """grid_sampler(Tensor input, Tensor grid, int interpolation_mode, int padding_mode, bool align_corners) -> Tensor

    GridSample over 4-D and 5-D inputs (opset 20 renamed the modes linear and cubic)."""
    return _grid_sample(g, input, grid, interpolation_mode, padding_mode, align_corners,
                        ("linear", "nearest", "cubic"))
