"""Signal processing and complex numbers: window functions, STFT, FFTs, and the complex
tensors they make (view_as_real/view_as_complex, real/imag, polar, complex).

ONNX has no complex tensors here: a complex tensor is its real pairs, a real tensor with a
trailing axis of 2 (real, imaginary), as ONNX's DFT and STFT produce them. Only symbolics
registered with ``accepts_complex=True`` receive complex inputs (the walker
declines the rest clearly), and they read which operands are complex from the TorchScript
types (:func:`is_complex`).
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable, Sequence

import torch

from oxport import OpPack
from oxport import symbolic_helper as sh
from oxport.ir import REAL_OF_COMPLEX, Type, Value
from oxport.types import JitScalarType

pack = OpPack("oxport.signal", cases="oxport.opsets.cases.signal")


# -- complex tensors as real pairs ----------------------------------------------------------
def is_complex(g, position: int, *kinds: str) -> bool:
    """Whether input ``position`` of the node being converted, if it is one of ``kinds``
    (any kind when none are named), is a complex tensor."""
    node = g.original_node
    if node is None or position >= node.inputsSize() or (
            kinds and node.kind().removesuffix("_") not in kinds):
        return False
    ts_type = node.inputsAt(position).type()
    return sh.is_tensor_type(ts_type) and ts_type.dtype() in REAL_OF_COMPLEX


def as_pairs(g, value: Value, output: int = 0) -> Value:
    """``value`` marked as the real pairs of the node's complex output ``output``, typed as
    them where the front end knows that output's dtype (scripted code leaves it to
    inference)."""
    pairs = Type.of(g.original_node.outputsAt(output).type()).as_real_pairs()
    if pairs.dtype() is not None:
        value.setType(pairs)
    return sh.mark_complex_pairs(value)


def complex_cast(g, pairs: Value, target: torch.dtype | None) -> Value:
    """Complex pairs cast to the complex dtype ``target`` (None: kept as they are; a cast to
    a real dtype, which drops the imaginary part with a warning in PyTorch, is declined)."""
    if target is None:
        return as_pairs(g, pairs)
    if target not in REAL_OF_COMPLEX:
        sh._unimplemented(g.original_node.kind(), f"a complex tensor cast to {target}; take "
                                                  f".real or .abs() first")
    if pairs.type().dtype() != REAL_OF_COMPLEX[target]:
        pairs = sh.cast_to(g, pairs, REAL_OF_COMPLEX[target])
    return as_pairs(g, pairs)


def _after_last(value: Value) -> int:
    """The axis after ``value``'s last (-1 when its rank is unknown: negative axes need
    opset 11), where its pairs axis is or goes."""
    rank = sh._get_tensor_rank(value)
    return -1 if rank is None else rank


def _part(g, pairs: Value, index: int) -> Value:
    """The real (0) or imaginary (1) part of complex pairs."""
    rank = sh._get_tensor_rank(pairs)
    return g.op("Gather", pairs, g.constant(torch.tensor(index)),
                axis_i=-1 if rank is None else rank - 1)


def parts(g, value: Value, complex_value: bool) -> tuple[Value, Value | None]:
    """The real and imaginary parts of complex pairs, typed as the complex tensor's shape
    (a real tensor: itself and None)."""
    if not complex_value:
        return value, None
    shape = value.type().shape
    type_ = Type.tensor(value.type().dtype(), None if shape is None else shape[:-1])
    return tuple(_part(g, value, i).setType(type_) for i in (0, 1))  # type: ignore[return-value]


def from_parts(g, real: Value, imag: Value) -> Value:
    """Complex pairs of the node's output from its real and imaginary parts."""
    return as_pairs(g, _pair(g, real, imag))


def _pair(g, real: Value, imag: Value) -> Value:
    axis = _after_last(real) if _after_last(real) == _after_last(imag) else -1
    return g.op("Concat", sh._unsqueeze_helper(g, real, [axis]),
                sh._unsqueeze_helper(g, imag, [axis]), axis_i=axis)


def complex_operand(g, value: Value, position: int, kind: str, dtype: torch.dtype | None
                    ) -> tuple[Value, bool]:
    """Input ``position`` of the node (of ``kind``) and whether it is complex: a complex
    tensor is its pairs already; a complex number (``x * (2 + 3j)``) becomes the pair of
    ``dtype`` (a real dtype; float32 when None)."""
    number = value.const if isinstance(value, Value) and value.is_const else None
    if isinstance(number, builtins.complex):  # (``complex`` here is the aten symbolic)
        real = dtype if dtype is not None and dtype.is_floating_point else torch.float32
        return sh.mark_complex_pairs(g.constant(torch.tensor([number.real, number.imag],
                                                             dtype=real))), True
    return value, is_complex(g, position, kind)


def pair_dtype(*values: Value) -> torch.dtype | None:
    """The real dtype of the first complex pairs or float tensor among ``values``."""
    return next((v.type().dtype() for v in values if isinstance(v, Value)
                 and v.type().dtype() is not None and v.type().dtype().is_floating_point), None)


def as_complex_pairs(g, real: Value, dtype: torch.dtype | None) -> Value:
    """A real tensor (or number) as complex pairs with a zero imaginary part."""
    real = sh.cast_to(g, g.as_value(real), dtype or torch.float32)
    return _pair(g, real, g.op("Mul", real, g.constant(torch.tensor(0, dtype=dtype or
                                                                     torch.float32))))


def complex_add(g, self: Value, other: Value, self_complex: bool, other_complex: bool,
                subtract: bool = False) -> Value:
    """``self + other`` (``self - other`` with ``subtract``), at least one complex (as
    pairs); a real operand adds to the real parts."""
    dtype = pair_dtype(*(v for v, c in ((self, self_complex), (other, other_complex)) if c))
    self, other = (v if c else as_complex_pairs(g, v, dtype)
                   for v, c in ((self, self_complex), (other, other_complex)))
    if dtype is not None:
        self, other = sh.cast_to(g, self, dtype), sh.cast_to(g, other, dtype)
    return g.op("Sub" if subtract else "Add", self, other)


def complex_mul(g, self: Value, other: Value, self_complex: bool, other_complex: bool
                ) -> Value:
    """The product of two tensors, at least one complex (as pairs)."""
    if not (self_complex and other_complex):
        real, pairs = (other, self) if self_complex else (self, other)
        if pairs.type().dtype() is not None:
            real = sh.cast_to(g, real, pairs.type().dtype())
        if real.type().dim() != 0:  # a real tensor scales both parts of each element
            real = sh._unsqueeze_helper(g, real, [_after_last(real)])
        return g.op("Mul", pairs, real)
    a, b, c, d = _part(g, self, 0), _part(g, self, 1), _part(g, other, 0), _part(g, other, 1)
    return _pair(g, g.op("Sub", g.op("Mul", a, c), g.op("Mul", b, d)),
                 g.op("Add", g.op("Mul", a, d), g.op("Mul", b, c)))


def complex_abs(g, pairs: Value) -> Value:
    """The magnitude of complex pairs."""
    return sh.reduce_helper(g, "ReduceL2", pairs, [-1], keepdims_i=0)


@pack.symbolic("aten::view_as_real", since=7, accepts_complex=True)
def view_as_real(g, self: Value) -> Value:
    """view_as_real(Tensor(a) self) -> Tensor(a)

    The pairs themselves, typed real."""
    return g.op("Identity", self)


@pack.symbolic("aten::view_as_complex", since=7, accepts_complex=True)
def view_as_complex(g, self: Value) -> Value:
    """view_as_complex(Tensor(a) self) -> Tensor(a)

    A real tensor whose last axis is 2 already is the pairs."""
    return as_pairs(g, g.op("Identity", self))


def _complex_part(index: int, name: str):
    def symbolic(g, self: Value) -> Value:
        if not is_complex(g, 0):
            if index == 0:
                return g.op("Identity", self)
            sh._unimplemented(f"aten::{name}", "the imaginary part of a real tensor")
        return _part(g, self, index)
    symbolic.__name__ = name
    symbolic.__doc__ = (f"{name}(Tensor(a) self) -> Tensor(a)\n\n"
                        f"The {'real' if index == 0 else 'imaginary'} part of complex pairs.")
    return symbolic


pack.symbolic("aten::real", since=7, accepts_complex=True)(_complex_part(0, "real"))
pack.symbolic("aten::imag", since=7, accepts_complex=True)(_complex_part(1, "imag"))


@pack.symbolic("aten::complex", since=8)
def complex(g, real: Value, imag: Value) -> Value:  # noqa: A001 - the aten name
    """complex(Tensor real, Tensor imag) -> Tensor

    Pairs of the two parts, broadcast together."""
    shape = g.op("Shape", g.op("Add", real, imag))
    return as_pairs(g, _pair(g, g.op("Expand", real, shape), g.op("Expand", imag, shape)))


@pack.symbolic("aten::polar", since=7)
def polar(g, abs: Value, angle: Value) -> Value:  # noqa: A002 - the aten names
    """polar(Tensor abs, Tensor angle) -> Tensor

    ``abs * (cos(angle), sin(angle))``."""
    return as_pairs(g, _pair(g, g.op("Mul", abs, g.op("Cos", angle)),
                             g.op("Mul", abs, g.op("Sin", angle))))


# -- windows --------------------------------------------------------------------------------
def _cosine_sum(*coefficients: float) -> Callable[..., Value]:
    """``sum_k (-1)^k a_k cos(2 pi k n / N)`` (the Hann, Hamming and Blackman family)."""
    def build(g, number: Callable[[float], Value], phase: Value) -> Value:
        total = number(coefficients[0])
        for k, a in enumerate(coefficients[1:], start=1):
            term = g.op("Mul", number(a), g.op("Cos", g.op("Mul", phase, number(float(k)))))
            total = g.op("Sub" if k % 2 else "Add", total, term)
        return total
    return build


def _bartlett(g, number: Callable[[float], Value], phase: Value) -> Value:
    """``1 - |2n/N - 1|`` (the phase is 2 pi n / N)."""
    return g.op("Sub", number(1.0), g.op("Abs", g.op(
        "Sub", g.op("Div", phase, number(math.pi)), number(1.0))))


def _window(name: str, build, parameters: Sequence[str] = ()):
    """``aten::<name>_window(length[, periodic[, *parameters]], dtype, layout, device,
    pin_memory)``: computed by PyTorch at export time when the length is a constant, else
    from the phase ``2 pi n / N`` by what ``build(*parameter values)`` returns (opset 11,
    Range)."""
    op = f"aten::{name}_window"

    def symbolic(g, window_length: Value, *args: Value) -> Value:
        options, dtype_arg = args[:-4], args[-4]
        periodic = bool(sh._get_const(options[0], "b", "periodic")) if options else True
        values = [sh._get_const(v, "f", p) for v, p in zip(options[1:], parameters)]
        dtype = (JitScalarType(sh._get_const(dtype_arg, "i", "dtype")).dtype()
                 if not sh._is_none(dtype_arg) else torch.get_default_dtype())
        length = sh._maybe_get_const(window_length, "i")
        if not isinstance(length, Value):
            window = getattr(torch, f"{name}_window")(length, periodic, *values,
                                                      dtype=dtype)
            return g.constant(window)
        if build is None or g.opset < 11:
            sh._unimplemented(op, "a window length computed at run time" + (
                "" if build is None else " below opset 11"))
        return _window_at_run_time(g, build(*values), length, periodic, dtype)

    symbolic.__name__ = f"{name}_window"
    symbolic.__doc__ = (f"{name}_window(int window_length, *, ScalarType? dtype=None, "
                        "Layout? layout=None, Device? device=None, bool? pin_memory=None) "
                        f"-> Tensor\n{name}_window.periodic(int window_length, bool periodic, "
                        "*, ...) -> Tensor\nand the overloads taking the window's parameters"
                        f"\n\nThe {name} window (a constant for a constant length).")
    return symbolic


def _window_at_run_time(g, build, length: Value, periodic: bool, dtype: torch.dtype
                        ) -> Value:
    def number(v: float) -> Value:
        return g.constant(torch.tensor(v, dtype=dtype))
    size = sh.cast_to(g, length, dtype)
    steps = g.op("Range", number(0.0), size, number(1.0))
    denominator = size if periodic else g.op("Sub", size, number(1.0))
    phase = g.op("Div", g.op("Mul", steps, number(2 * math.pi)), denominator)
    window = build(g, number, phase)
    return g.op("Where", g.op("Equal", size, number(1.0)), number(1.0), window)


# name, its builder from the op's parameters (None: constant lengths only), the parameters
for _name, _build, _parameters in (
        ("hann", lambda: _cosine_sum(0.5, 0.5), ()),
        ("hamming", lambda alpha=0.54, beta=0.46: _cosine_sum(alpha, beta), ("alpha", "beta")),
        ("blackman", lambda: _cosine_sum(0.42, 0.5, 0.08), ()),
        ("bartlett", lambda: _bartlett, ()),
        ("kaiser", None, ("beta",))):
    pack.symbolic(f"aten::{_name}_window", since=7)(_window(_name, _build, _parameters))


# -- Fourier transforms ---------------------------------------------------------------------
def _dft(g, pairs: Value, axis: int, *, inverse: bool = False, onesided: bool = False
         ) -> Value:
    """ONNX DFT along ``axis`` of [batch, ..., 1 or 2] (axis an attribute at 17, an input
    from 20)."""
    flags = {"inverse_i": int(inverse), "onesided_i": int(onesided)}
    if g.opset >= 20:
        return g.op("DFT", pairs, None, g.constant(torch.tensor(axis)), **flags)
    return g.op("DFT", pairs, axis_i=axis, **flags)


def _as_signal(g, x: Value, complex_input: bool) -> Value:
    """Complex pairs, or a real tensor with a trailing axis of 1."""
    return x if complex_input else sh._unsqueeze_helper(g, x, [-1])


def _signal_size(g, x: Value, axes: Sequence[int]) -> Value | float:
    """The number of elements a transform over ``axes`` sums (a float, or a Value)."""
    sizes = [sh._get_tensor_dim_size(x, a) for a in axes]
    if all(s is not None for s in sizes):
        return float(math.prod(sizes))
    shape = g.op("Shape", x)
    picked = g.op("Gather", shape, g.constant(torch.tensor(list(axes))), axis_i=0)
    return sh.reduce_helper(g, "ReduceProd", picked, [0], keepdims_i=0)


_NORM_POWER = {None: 0.0, "backward": 0.0, "ortho": 0.5, "forward": 1.0}


def _normalized(g, pairs: Value, size: Value | float, power: float, dtype: torch.dtype
                ) -> Value:
    """``pairs / size ** power``."""
    if power == 0:
        return pairs
    if isinstance(size, float):
        return g.op("Mul", pairs, g.constant(torch.tensor(size ** -power, dtype=dtype)))
    scale = g.op("Pow", sh.cast_to(g, size, dtype), g.constant(torch.tensor(power, dtype=dtype)))
    return g.op("Div", pairs, scale)


def _norm_mode(norm: Value | None, op: str) -> str | None:
    mode = None if norm is None or sh._is_none(norm) else sh._get_const(norm, "s", "norm")
    if mode not in _NORM_POWER:
        sh._unimplemented(op, f"norm={mode!r}")
    return mode


def _fourier(g, x: Value, complex_input: bool, axes: Sequence[int], mode: str | None, *,
             inverse: bool = False, onesided: bool = False) -> Value:
    """DFTs of ``x`` (complex pairs, or real) along ``axes`` (non-negative, of the complex
    view) scaled as ``norm=mode`` asks; complex pairs out. ONNX's inverse DFT divides by n
    already, PyTorch's by n ** (1 - power)."""
    dtype = x.type().dtype()
    if dtype is None or not dtype.is_floating_point:  # integers transform as float32
        x, dtype = sh.cast_to(g, x, torch.float32), torch.float32
    pairs = _as_signal(g, x, complex_input)
    batch_added = 0 in axes  # DFT's first axis is a batch axis: add one
    if batch_added:
        pairs = sh._unsqueeze_helper(g, pairs, [0])
    for axis in axes:
        pairs = _dft(g, pairs, axis + batch_added, inverse=inverse, onesided=onesided)
    if batch_added:
        pairs = sh._squeeze_helper(g, pairs, [0])
    power = _NORM_POWER[mode]
    return _normalized(g, pairs, _signal_size(g, x, axes), -power if inverse else power,
                       dtype)


def _signal_sizes(s: Value | None, op: str) -> list[int] | None:
    """The signal sizes ``n=`` / ``s=`` asks for (None: the input's own)."""
    if s is None or sh._is_none(s):
        return None
    sizes = sh._get_const(s, "is", "s")
    sizes = [sizes] if isinstance(sizes, int) else list(sizes)
    if any(n is None or n < 1 for n in sizes):
        sh._unimplemented(op, f"signal sizes {sizes} (each must be a positive int)")
    return sizes


def _resized(g, x: Value, axis: int, n: int, rank: int) -> Value:
    """``x`` (of ``rank`` axes, a complex tensor's pairs axis counted) trimmed or
    zero-padded at the end of ``axis`` to ``n`` elements, as PyTorch does for an FFT's
    signal size."""
    size = sh._get_tensor_dim_size(x, axis)
    if size == n:
        return x
    if size is None or size > n:
        x = sh._slice_helper(g, x, [axis], [0], [n])
    if size is not None and size > n:
        return x
    if size is not None:
        missing = g.constant(torch.tensor([n - size]))
    else:
        length = g.op("Gather", g.op("Shape", x), g.constant(torch.tensor([axis])), axis_i=0)
        missing = g.op("Sub", g.constant(torch.tensor([n])), length)
    zeros = g.constant(torch.zeros(axis, dtype=torch.int64))
    after = g.constant(torch.zeros(rank - axis - 1, dtype=torch.int64))
    pads = g.op("Concat", zeros, g.constant(torch.tensor([0])), after, zeros, missing, after,
                axis_i=0)
    return g.op("Pad", x, pads)


def _complex_rank(g, x: Value, op: str) -> int:
    rank = sh._get_tensor_rank(x)
    if rank is None:
        sh._unimplemented(op, "an input of unknown rank")
    return rank - is_complex(g, 0)


@pack.symbolic("aten::fft_fftn", since=17, accepts_complex=True)
def fft_fftn(g, self: Value, s: Value | None = None, dim: Value | None = None,
             norm: Value | None = None) -> Value:
    """fft_fftn(Tensor self, SymInt[1]? s=None, int[1]? dim=None, str? norm=None) -> Tensor

    One DFT per axis of a real or complex input; complex pairs out."""
    op = "aten::fft_fftn"
    rank = _complex_rank(g, self, op)
    sizes = _signal_sizes(s, op)
    axes = (list(range(rank))[-len(sizes) if sizes else 0:] if dim is None or sh._is_none(dim)
            else sh._get_const(dim, "is", "dim"))
    axes = [a % rank for a in ([axes] if isinstance(axes, int) else axes)]
    if sizes is not None:
        if len(sizes) != len(axes):
            sh._unimplemented(op, f"s={sizes} for the {len(axes)} axes {axes}")
        for axis, n in zip(axes, sizes):
            self = _resized(g, self, axis, n, rank + is_complex(g, 0))
    return as_pairs(g, _fourier(g, self, is_complex(g, 0), sorted(axes), _norm_mode(norm, op)))


def _one_dim_fft(name: str, inverse: bool, onesided: bool):
    op = f"aten::{name}"

    def symbolic(g, self: Value, n: Value | None = None, dim: Value | None = None,
                 norm: Value | None = None) -> Value:
        complex_input = is_complex(g, 0)
        if onesided and complex_input:
            sh._unimplemented(op, "a complex input (rfft takes real signals)")
        axis = sh._get_const(dim, "i", "dim") % _complex_rank(g, self, op)
        sizes = _signal_sizes(n, op)
        if sizes is not None:
            self = _resized(g, self, axis, sizes[0], sh._get_tensor_rank(self))
        return as_pairs(g, _fourier(g, self, complex_input, [axis], _norm_mode(norm, op),
                                    inverse=inverse, onesided=onesided))
    symbolic.__name__ = name
    symbolic.__doc__ = (f"{name}(Tensor self, SymInt? n=None, int dim=-1, str? norm=None) "
                        "-> Tensor\n\n"
                        f"ONNX DFT ({'inverse, ' if inverse else ''}"
                        f"{'one-sided, ' if onesided else ''}one axis) of the signal trimmed "
                        "or zero-padded to n; complex pairs out.")
    return symbolic


for _name, _inverse, _onesided in (("fft_fft", False, False), ("fft_ifft", True, False),
                                   ("fft_rfft", False, True)):
    pack.symbolic(f"aten::{_name}", since=17, accepts_complex=True)(
        _one_dim_fft(_name, _inverse, _onesided))


@pack.symbolic("aten::fft_irfft", since=17, accepts_complex=True)
def fft_irfft(g, self: Value, n: Value | None = None, dim: Value | None = None,
              norm: Value | None = None) -> Value:
    """fft_irfft(Tensor self, SymInt? n=None, int dim=-1, str? norm=None) -> Tensor

    The real signal of a one-sided spectrum: the missing bins are the conjugates of the
    mirrored ones (a Gather of static indices), then an inverse DFT, then its real part."""
    op = "aten::fft_irfft"
    if not is_complex(g, 0):
        sh._unimplemented(op, "a real input (irfft takes a complex spectrum)")
    axis = sh._get_const(dim, "i", "dim") % _complex_rank(g, self, op)
    bins = sh._get_tensor_dim_size(self, axis)
    length = 2 * (bins - 1) if bins is not None and (n is None or sh._is_none(n)) else \
        sh._get_const(n, "i", "n") if n is not None and not sh._is_none(n) else None
    if bins is None or length is None or length // 2 + 1 > bins:
        sh._unimplemented(op, "a spectrum of unknown length along dim, or an n that pads it")
    kept = length // 2 + 1
    spectrum = sh._slice_helper(g, self, [axis], [0], [kept]) if kept < bins else self
    mirrored = g.op("Gather", spectrum, g.constant(torch.arange(length - kept, 0, -1)),
                    axis_i=axis)
    conjugate = g.op("Mul", mirrored, g.constant(torch.tensor(
        [1.0, -1.0], dtype=self.type().dtype() or torch.float32)))
    full = g.op("Concat", spectrum, conjugate, axis_i=axis)
    pairs = _fourier(g, full, True, [axis], _norm_mode(norm, op), inverse=True)
    return _part(g, pairs, 0)


#: ONNX Pad's mode for each ``pad_mode`` of ``torch.stft``'s centring (and its first opset).
_PAD_MODES = {"constant": ("constant", 11), "reflect": ("reflect", 11),
              "replicate": ("edge", 11), "circular": ("wrap", 19)}


def _centred(g, signal: Value, n_fft: int, pad_mode: Value) -> Value:
    """``signal`` ([batch, samples]) padded by ``n_fft // 2`` at both ends as ``pad_mode``
    says (``torch.stft(..., center=True)``)."""
    mode = sh._get_const(pad_mode, "s", "pad_mode")
    if mode not in _PAD_MODES:
        sh._unimplemented("aten::stft", f"pad_mode={mode!r}")
    onnx_mode, since = _PAD_MODES[mode]
    if g.opset < since:
        sh._onnx_opset_unsupported_detailed("aten::stft", g.opset, since,
                                            f"pad_mode={mode!r} (Pad mode {onnx_mode!r})")
    half = n_fft // 2
    return g.op("Pad", signal, g.constant(torch.tensor([0, half, 0, half])), mode_s=onnx_mode)


@pack.symbolic("aten::stft", since=17)
def stft(g, self: Value, n_fft: Value, hop_length: Value, win_length: Value, window: Value,
         *options: Value) -> Value:
    """stft(Tensor self, int n_fft, int? hop_length=None, int? win_length=None, Tensor? window=None, bool normalized=False, bool? onesided=None, bool? return_complex=None, bool? align_to_window=None) -> Tensor
    stft.center(Tensor self, int n_fft, int? hop_length=None, int? win_length=None, Tensor? window=None, bool center=True, str pad_mode="reflect", bool normalized=False, bool? onesided=None, bool? return_complex=None, bool? align_to_window=None) -> Tensor

    ONNX STFT over [batch,] signal: frames of ``n_fft`` every ``hop_length`` under the
    window (zero-padded to ``n_fft`` about its centre), transposed to PyTorch's
    [batch,] frequency, frame, 2 (complex pairs, or the real form for return_complex=False).
    ``torch.stft``'s centring pads the signal before the default overload; the ``center``
    overload (``torch.ops.aten.stft.center``, kept by torch.export) pads it here."""
    overload = g.original_node.schema().partition("(")[0].partition(".")[2]
    center, pad_mode = options[:2] if overload == "center" else (None, None)
    rest = list(options[2:] if overload == "center" else options) + [None]
    normalized, onesided, return_complex, align_to_window = rest[:4]
    op = "aten::stft"
    rank = sh._get_tensor_rank(self)
    if rank not in (1, 2) or is_complex(g, 0):
        sh._unimplemented(op, "a signal that is not real and 1-D or 2-D [batch, samples]")
    if align_to_window is not None and not sh._is_none(align_to_window) and \
            sh._get_const(align_to_window, "b", "align_to_window"):
        sh._unimplemented(op, "align_to_window=True")
    n_fft = sh._get_const(n_fft, "i", "n_fft")
    hop = n_fft // 4 if sh._is_none(hop_length) else sh._get_const(hop_length, "i", "hop_length")
    length = n_fft if sh._is_none(win_length) else sh._get_const(win_length, "i", "win_length")
    dtype = self.type().dtype() or torch.float32
    if sh._is_none(window):
        window = g.constant(torch.ones(length, dtype=dtype))
    if length < n_fft:
        left = (n_fft - length) // 2
        window = g.op("Concat", g.constant(torch.zeros(left, dtype=dtype)), window,
                      g.constant(torch.zeros(n_fft - length - left, dtype=dtype)), axis_i=0)
    one_sided = sh._is_none(onesided) or sh._get_const(onesided, "b", "onesided")
    signal = self if rank == 2 else sh._unsqueeze_helper(g, self, [0])
    if center is not None and sh._get_const(center, "b", "center"):
        signal = _centred(g, signal, n_fft, pad_mode)
    frames = g.op("STFT", _as_signal(g, signal, False), g.constant(torch.tensor(hop)),
                  window, g.constant(torch.tensor(n_fft)), onesided_i=int(one_sided))
    out = g.op("Transpose", frames, perm_i=[0, 2, 1, 3])
    if rank == 1:
        out = sh._squeeze_helper(g, out, [0])
    if sh._get_const(normalized, "b", "normalized"):
        out = _normalized(g, out, float(n_fft), 0.5, dtype)
    if not sh._is_none(return_complex) and sh._get_const(return_complex, "b", "return_complex"):
        return as_pairs(g, out)
    return out
