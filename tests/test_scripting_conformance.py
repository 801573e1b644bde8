"""Scripted models against torch.onnx's TorchScript path, the oracle.

Each model exercises one construct scripted code uses (lists, None/Optional, values set
only on paths that do not raise, module attributes, calling conventions, sizes and
numbers computed in the graph). At opsets 13, 17 and 20 oxport's file must match eager
PyTorch in ONNX Runtime; where ``torch.onnx.export(..., dynamo=False)`` exports a file
ONNX Runtime runs, oxport's must also have its graph signature (number and order of
inputs and outputs, their element types and ranks) and its results, except for the
intended differences listed in :data:`INTENDED_DIFFERENCES`. Where a construct needs a
newer opset, oxport's error must name it. Models without data-dependent control flow
run traced too.
"""

from __future__ import annotations

import dataclasses
import io
import warnings
from collections.abc import Callable
from typing import Any, List, Optional, Tuple

import numpy as np
import onnxruntime as ort
import pytest
import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils import _pytree as pytree

import oxport
from oxport.errors import OnnxExporterError
from oxport.testing import flatten_expected
from oxport.frontends.arguments import normalize_args

OPSETS = (13, 17, 20)

#: Where oxport's file deliberately differs from torch.onnx's, and why.
INTENDED_DIFFERENCES = {
    "optional_input": (
        "An Optional[Tensor] argument given a tensor: torch.onnx declares the graph input "
        "optional(tensor), which ONNX has only from opset 15 (its file does not load below); "
        "oxport declares a plain tensor, valid at every opset and fed the same array."),
}


@dataclasses.dataclass
class Case:
    """A model (built by ``make``), its export args, and what to expect."""

    make: Callable[[], torch.nn.Module]
    args: tuple[Any, ...]
    #: Below this opset oxport must fail with an error naming it.
    min_opset: int | None = None
    #: Whether the model also exports traced (no data-dependent control flow).
    traceable: bool = False
    #: A key of INTENDED_DIFFERENCES the signature comparison allows.
    intended: str = ""


CASES: dict[str, Case] = {}


def case(*args: Any, **options: Any) -> Callable[[type], type]:
    def register(cls: type) -> type:
        CASES[cls.__name__] = Case(cls, args, **options)
        return cls
    return register


def _randn(*shape: int) -> Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape)))


# -- lists ---------------------------------------------------------------------------------
@case(_randn(3, 4), traceable=True)
class ConstantIndexList(torch.nn.Module):
    """A tensor attribute indexing: freezing folds the index list into a constant."""

    def __init__(self):
        super().__init__()
        self.register_buffer("rows", torch.tensor([0, 2]))

    def forward(self, x):
        return x[self.rows] + torch.cat([x, x], 0)[:2]


@case(_randn(2, 3, 4), traceable=True)
class FrozenGru(torch.nn.Module):
    """nn.GRU's weights reach aten::gru as a constant list once frozen."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.gru = torch.nn.GRU(4, 5, batch_first=True)

    def forward(self, x):
        return self.gru(x)


@case(_randn(4, 3))
class AppendOnSomeIterations(torch.nn.Module):
    def forward(self, x):
        rows: List[Tensor] = []
        for i in range(x.size(0)):
            if i % 2 == 0:
                rows.append(x[i] * 2)
        return torch.stack(rows)


@case(_randn(4, 3))
class AppendThenCatAndLen(torch.nn.Module):
    def forward(self, x):
        rows: List[Tensor] = []
        for i in range(x.size(0)):
            rows.append(x[i:i + 1] + i)
        return torch.cat(rows, 0), torch.tensor(len(rows))


@case(_randn(5, 3), traceable=True)
class LenOfSplit(torch.nn.Module):
    def forward(self, x):
        return x * len(x.split(2, 0))


@case(_randn(2, 3), traceable=True)
class DeleteItem(torch.nn.Module):
    def forward(self, x):
        parts = [x, x + 1, x + 2]
        del parts[1]
        return torch.stack(parts)


@case(_randn(4, 3))
class DeleteFromLoopList(torch.nn.Module):
    def forward(self, x):
        parts: List[Tensor] = []
        for i in range(x.size(0)):
            parts.append(x[i])
        del parts[0]
        return torch.stack(parts)


@case(_randn(4, 3), traceable=True)
class InsertPopSlice(torch.nn.Module):
    def forward(self, x):
        parts = list(x.unbind(0))
        parts.insert(0, x[0] * 10)
        last = parts.pop()
        return torch.stack(parts[1:3]) + last


@case(_randn(4, 3), traceable=True)
class SliceGrownList(torch.nn.Module):
    def forward(self, x):
        parts: List[Tensor] = []
        for i in range(x.size(0)):
            parts.append(x[i] * i)
        return torch.stack(parts[1:3]) + torch.stack(parts[::-2]).sum(0)


@case([_randn(2), _randn(2)])
class ListArgument(torch.nn.Module):
    def forward(self, xs: List[Tensor]):
        return xs[0] + xs[1] * len(xs)


@case((_randn(2), _randn(2)), _randn(2), traceable=True)
class TupleArgument(torch.nn.Module):
    def forward(self, xs: Tuple[Tensor, Tensor], y):
        return xs[0] * xs[1] + y


@case(_randn(2), traceable=True)
class ListResult(torch.nn.Module):
    def forward(self, x):
        return [x + 1, x * 2]


@case(_randn(4), traceable=True)
class UnpackLists(torch.nn.Module):
    def forward(self, x):
        a, b = [x + 1, x * 2]
        c, d = x.chunk(2, 0)
        return a + b + c.sum() + d.sum()


@case(_randn(2, 3))
class ListsFromBranches(torch.nn.Module):
    def forward(self, x):
        if bool(x.sum() > 0):
            parts = [x, x * 2]
        else:
            parts = [x * 3, x]
        return torch.cat(parts, 0)


@case(_randn(3, 4))
class SequenceThroughLoop(torch.nn.Module):
    def forward(self, x):
        outs: List[Tensor] = []
        h = torch.zeros(x.size(1))
        for i in range(x.size(0)):
            h = torch.tanh(x[i] + h)
            outs.append(h)
            outs.append(h * 2)
        return torch.stack(outs)


@case(_randn(3, 4))
class ListGrownByPlusEquals(torch.nn.Module):
    def forward(self, x):
        rows: List[Tensor] = []
        for i in range(x.size(0)):
            rows += [x[i] * i]
        rows.pop()
        return rows


@case(_randn(5, 3))
class StackOfScalarsFromLoop(torch.nn.Module):
    """Empty lists (constants once frozen) grown in a loop, stacked: the stack's rank comes
    from the items'."""

    def forward(self, x):
        sums = []
        maxima = []
        for i in range(x.size(0)):
            sums.append(x[i].sum())
            maxima = maxima + [x[i].max()]
        return torch.stack(sums), torch.stack(maxima) * 2


# -- None / Optional -------------------------------------------------------------------------
@case(_randn(3, 2), min_opset=16)
class NoneBeforeLoop(torch.nn.Module):
    def forward(self, x):
        h: Optional[Tensor] = None
        for i in range(x.size(0)):
            if h is None:
                h = x[i]
            else:
                h = h + x[i]
        assert h is not None
        return h


@case(_randn(3, 2), min_opset=16)
class NoneOnOneBranch(torch.nn.Module):
    def forward(self, x):
        y: Optional[Tensor] = None
        if bool(x.sum() > 0):
            y = x * 2
        if y is None:
            return x
        return y


@case(_randn(3, 2), min_opset=16)
class OptionalResultOfIf(torch.nn.Module):
    def forward(self, x) -> Optional[Tensor]:
        y: Optional[Tensor] = x
        if bool(x.sum() > 100):
            y = None
        return y


@case(_randn(3, 2), min_opset=16)
class OptionalResultOfLoop(torch.nn.Module):
    def forward(self, x) -> Optional[Tensor]:
        y: Optional[Tensor] = None
        for i in range(int(x.sum() > -100) * 2):
            y = x * i
        return y


@case(_randn(3, 2))
class ValueSetOnlyWhereNothingRaises(torch.nn.Module):
    def forward(self, x):
        if x.dim() == 2:
            y = x + 1
        elif x.dim() == 3:
            y = x.sum(0)
        else:
            raise ValueError("bad rank")
        if bool(x.sum() > 100):
            raise RuntimeError("too big")
        return y


@case(_randn(3, 2).abs())
class RaiseInLoop(torch.nn.Module):
    def forward(self, x):
        for i in range(x.size(0)):
            if i > 10:
                raise ValueError("too many")
            if bool(x[i].sum() >= 0):
                z = x[i]
            else:
                raise ValueError("negative")
            x = x + z
        return x


@case(_randn(3, 2))
class EarlyReturnInBranch(torch.nn.Module):
    def forward(self, x):
        if bool(x.sum() > -100):
            if bool(x.sum() > 100):
                x = x + 4
            else:
                return x * 2
        return x


@case(_randn(3, 2))
class EarlyReturnOfList(torch.nn.Module):
    def forward(self, x):
        if bool(x.sum() > -100):
            if bool(x.sum() > 100):
                x = x + 4
            else:
                rows = list(x)
                rows.append(x[0] * 3)
                return rows
        return [x, x]


# -- module attributes -------------------------------------------------------------------------
@case(_randn(1, 2, 4, 4), traceable=True)
class NumberAttributes(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.kernel = (2, 2)
        self.scales = [1.5, 2.0]
        self.pads: List[int] = [1, 1]

    def forward(self, x):
        y = F.avg_pool2d(x, self.kernel)
        return F.pad(y, self.pads) * self.scales[0] + self.scales[1]


@case(_randn(1, 2, 5, 5), traceable=True)
class FusedConvReLU(torch.nn.Module):
    def __init__(self):
        super().__init__()
        import torch.ao.nn.intrinsic as nni
        torch.manual_seed(0)
        self.conv = nni.ConvReLU2d(torch.nn.Conv2d(2, 3, 3), torch.nn.ReLU())

    def forward(self, x):
        return self.conv(x)


@case(_randn(4, 3))
class BufferAssignedInLoop(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.ones(3))

    def forward(self, x):
        for i in range(x.size(0)):
            self.total = self.total * 0.5 + x[i]
        return self.total * 1


@case(_randn(4, 3))
class AttributesAssignedInForward(torch.nn.Module):
    """A number, a list and a tensor attribute of a submodule assigned in forward (the
    tensor with another shape than it had), in a loop and a branch."""

    def __init__(self):
        super().__init__()
        self.flag = False
        self.rows: List[Tensor] = [torch.ones(1)]
        self.inner = torch.nn.Linear(3, 2)

    def forward(self, x):
        self.flag = True
        self.rows = []
        self.inner.weight = x[0] * 0
        for i in range(x.size(0)):
            self.inner.weight = self.inner.weight + x[i]
            self.rows.append(x[i] * i)
        if bool(x.sum() > 100):
            self.flag = False
        if self.flag:
            return self.inner.weight, torch.stack(self.rows)
        return -self.inner.weight, torch.stack(self.rows)


# -- calling conventions ------------------------------------------------------------------------
class OptionalMask(torch.nn.Module):
    def forward(self, x, mask: Optional[Tensor] = None):
        if mask is not None:
            x = x * mask
        return x + 1


CASES["OptionalMaskLeftOut"] = Case(OptionalMask, (_randn(3),))
CASES["OptionalMaskGiven"] = Case(OptionalMask, (_randn(3), _randn(3)),
                                  intended="optional_input")
CASES["OptionalMaskByName"] = Case(OptionalMask, (_randn(3), {"mask": _randn(3)}),
                                   intended="optional_input")


@case(_randn(3))
class NumberDefaults(torch.nn.Module):
    def forward(self, x, scale: float = 2.0, shift: int = 1):
        return x * scale + shift


@case(_randn(3), traceable=True)
class DeviceComparison(torch.nn.Module):
    def forward(self, x):
        z = torch.zeros(x.shape, device=x.device)
        if x.device == torch.device("cpu"):
            return x + z + 1
        return x


# -- shapes, types and numbers computed in the graph ---------------------------------------
@case(_randn(4, 1), _randn(3), traceable=True)
class ComputedChunks(torch.nn.Module):
    def forward(self, x, y):
        a, b = torch.broadcast_tensors(x, y)
        parts = a.chunk(x.size(0) // 2, 0)
        return a + b, parts[0]


@case(_randn(2, 3, 5), _randn(2, 3, 4), _randn(2, 4, 5), traceable=True)
class ComputedBeta(torch.nn.Module):
    def forward(self, m, a, b):
        return torch.baddbmm(m, a, b, beta=float(a.size(0)) / 2, alpha=0.5)


@case(_randn(4, 3).log_softmax(1), torch.tensor([0, 2, 1, 2]), traceable=True)
class ComputedIgnoreIndex(torch.nn.Module):
    def forward(self, logp, target):
        return F.nll_loss(logp, target, ignore_index=logp.size(1) - 1)


@case(_randn(1, 2, 4, 4), traceable=True)
class Interpolate(torch.nn.Module):
    def forward(self, x):
        a = F.interpolate(x, scale_factor=2.0, mode="nearest")
        b = F.interpolate(x, size=(6, 6), mode="bilinear", align_corners=False)
        return a[:, :, :6, :6] + b


@case(_randn(3), traceable=True)
class IsFloatingPoint(torch.nn.Module):
    def forward(self, x):
        if x.is_floating_point():
            return x * 2
        return x.float()


@case(_randn(2, 3), traceable=True)
class RandIntShape(torch.nn.Module):
    def forward(self, x):
        r = torch.randint(0, 3, x.shape)
        return x + (r >= 0).to(x.dtype)


@case(_randn(3), traceable=True)
class NumberArithmetic(torch.nn.Module):
    def forward(self, x):
        n = x.size(0)
        f = float(n) * 1.5 + 2
        big = n > 2
        k = n * 2 + int(big)
        return x * f + k, x * float(big)


# -- the harness -------------------------------------------------------------------------------
@dataclasses.dataclass
class Run:
    """An exported file run in ONNX Runtime: its signature and outputs."""

    inputs: list[tuple[str, int | None]]
    outputs: list[tuple[str, int | None]]
    results: list[Any]


def _build(name: str, mode: str) -> torch.nn.Module:
    model = CASES[name].make().eval()
    if mode == "script":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            model = torch.jit.script(model)
    return model


def _feeds(args: tuple[Any, ...]) -> list[Any]:
    """One ONNX Runtime feed per graph input: each tensor, tuples flattened, a list of
    tensors as one Sequence."""
    positional, kwargs = normalize_args(args)
    feeds: list[Any] = []
    for arg in (*positional, *kwargs.values()):
        if isinstance(arg, list):
            feeds.append([t.numpy() for t in arg])
        else:
            feeds.extend(t.numpy() for t in pytree.tree_leaves(arg) if isinstance(t, Tensor))
    return feeds


def _signature(entries: Any, unwrap_optional: bool) -> list[tuple[str, int | None]]:
    signature = []
    for entry in entries:
        kind = entry.type
        if unwrap_optional and kind.startswith("optional("):
            kind = kind[len("optional("):-1]
        shape = entry.shape if isinstance(entry.shape, list) else None
        signature.append((kind, None if shape is None else len(shape)))
    return signature


def _run(data: bytes, args: tuple[Any, ...], unwrap_optional: bool) -> Run:
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    inputs = session.get_inputs()
    feeds = _feeds(args)
    assert len(feeds) == len(inputs), f"{len(inputs)} graph inputs for {len(feeds)} feeds"
    results = session.run(None, {i.name: f for i, f in zip(inputs, feeds)})
    return Run(_signature(inputs, unwrap_optional), _signature(session.get_outputs(), False),
               results)


def _torch_onnx(model: Any, args: tuple[Any, ...], opset: int, unwrap: bool) -> Run | None:
    """torch.onnx's file run in ONNX Runtime, or None when it fails to export or to run."""
    buffer = io.BytesIO()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, args, buffer, opset_version=opset, dynamo=False)
        return _run(buffer.getvalue(), args, unwrap)
    except Exception:  # noqa: BLE001 - the oracle failing is an outcome, not an error here
        return None


def _eager(model: Any, args: tuple[Any, ...]) -> list[Tensor]:
    positional, kwargs = normalize_args(args)
    with torch.no_grad():
        return flatten_expected(model(*positional, **kwargs))


def _flat(results: list[Any]) -> list[Any]:
    return [item for result in results
            for item in (result if isinstance(result, list) else [result])]


def _same(results: list[Any], expected: list[Any], what: str) -> None:
    """Outputs match (a Sequence output stands for the tensors of a returned list)."""
    results, expected = _flat(results), _flat(expected)
    assert len(results) == len(expected), f"{len(results)} outputs, {what} has {len(expected)}"
    for index, (got, want) in enumerate(zip(results, expected)):
        want = want.numpy() if isinstance(want, Tensor) else np.asarray(want)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-5,
                                   err_msg=f"output {index} differs from {what}")


PARAMS = [pytest.param(name, mode, opset, id=f"{name}-{mode}-opset{opset}")
          for name, spec in CASES.items() for mode in ("script", "trace")
          if mode == "script" or spec.traceable for opset in OPSETS]


@pytest.mark.parametrize("name, mode, opset", PARAMS)
def test_scripted_model_matches_torch_onnx(name: str, mode: str, opset: int) -> None:
    spec = CASES[name]
    if spec.min_opset is not None and opset < spec.min_opset:
        with pytest.raises(OnnxExporterError, match=f"opset {spec.min_opset} would"):
            oxport.convert(_build(name, mode), spec.args, opset_version=opset)
        return
    expected = _eager(_build(name, mode), spec.args)  # (a model may update its buffers)
    buffer = io.BytesIO()
    oxport.export(_build(name, mode), spec.args, buffer, opset_version=opset)
    unwrap = spec.intended == "optional_input"
    ours = _run(buffer.getvalue(), spec.args, unwrap)
    _same(ours.results, expected, "eager PyTorch")
    theirs = _torch_onnx(_build(name, mode), spec.args, opset, unwrap)
    if theirs is not None:
        assert (ours.inputs, ours.outputs) == (theirs.inputs, theirs.outputs), (
            "graph signature differs from torch.onnx's")
        _same(ours.results, theirs.results, "torch.onnx's file")


def test_every_intended_difference_is_used() -> None:
    used = {spec.intended for spec in CASES.values() if spec.intended}
    assert used == set(INTENDED_DIFFERENCES)


@pytest.mark.parametrize("opset", [16, 20])
def test_optional_input_difference_runs_where_torch_onnx_fails(opset: int) -> None:
    """The intended difference: torch.onnx's optional(tensor) input does not load at opset
    13 (ONNX has no Optional there); oxport's plain tensor input loads and runs at 13 and
    at every later opset, fed exactly what torch.onnx's file is fed from opset 15."""
    args = (_randn(3), _randn(3))
    model = _build("OptionalMaskGiven", "script")
    assert _torch_onnx(model, args, 13, True) is None
    for version in (13, opset):
        buffer = io.BytesIO()
        oxport.export(model, args, buffer, opset_version=version)
        ours = _run(buffer.getvalue(), args, False)
        assert ours.inputs[1] == ("tensor(float)", 1)
        _same(ours.results, _eager(model, args), "eager PyTorch")
