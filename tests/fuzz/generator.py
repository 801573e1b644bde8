"""A seeded generator of random PyTorch models for the fuzzer.

A model is Python source: a ``forward`` whose every line applies one op to earlier values
(``v0``, ``v1``… are the inputs, the rest are step results, ``self.w0``… are weights). The
generator runs each candidate line eagerly on the export-size inputs and keeps only lines
that run, so every model it returns is valid PyTorch. The source is also the reproducer.

Dynamic axes: every input dim whose size is in ``FuzzCase.resized`` is dynamic; the second
inputs replace each such size consistently (all dims of size 3 become 5), so dims that are
equal at export time (broadcast, matmul, cat partners) stay equal. Sizes whose change makes
eager fail are dropped from the dynamic set.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from typing import Any

import torch

FLOATS = (torch.float16, torch.float32, torch.float64)
INTS = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)
DTYPES = (*FLOATS, *INTS, torch.bool)
# Export-time input dtypes, float32 more often than the rest.
INPUT_DTYPES = (torch.float32,) * 6 + DTYPES


@dataclasses.dataclass
class FuzzCase:
    """One generated model with its inputs at the export size and at a second size."""

    seed: str
    source: str
    weights: dict[str, torch.Tensor]
    inputs: tuple[torch.Tensor, ...]
    second_inputs: tuple[torch.Tensor, ...] | None
    dynamic_axes: dict[str, list[int]]
    resized: dict[int, int]

    @property
    def input_names(self) -> list[str]:
        return [f"v{i}" for i in range(len(self.inputs))]

    def build(self) -> torch.nn.Module:
        return build_module(self.source, self.weights)

    def describe(self) -> str:
        shapes = ", ".join(f"{n}: {str(t.dtype)[6:]}{list(t.shape)}"
                           for n, t in zip(self.input_names, self.inputs))
        return (f"# seed {self.seed}; inputs {shapes}; dynamic_axes {self.dynamic_axes}; "
                f"second size {self.resized}\n{self.source}")


class _FuzzModule(torch.nn.Module):
    def __init__(self, weights: dict[str, torch.Tensor]) -> None:
        super().__init__()
        for name, tensor in weights.items():
            self.register_buffer(name, tensor)


def build_module(source: str, weights: dict[str, torch.Tensor]) -> torch.nn.Module:
    """A module whose ``forward`` is ``source`` (a ``def forward(self, …)``)."""
    namespace: dict[str, Any] = {"torch": torch, "F": torch.nn.functional}
    exec(compile(source, "<fuzz model>", "exec"), namespace)  # noqa: S102 - our own source
    cls = type("FuzzModel", (_FuzzModule,), {"forward": namespace["forward"]})
    return cls(weights)


def random_tensor(rng: random.Random, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """Small values: ints in [-4, 4] ([0, 8] for uint8), floats standard normal."""
    gen = torch.Generator().manual_seed(rng.getrandbits(31))
    if dtype == torch.bool:
        return torch.rand(shape, generator=gen) > 0.5
    if dtype == torch.uint8:
        return torch.randint(0, 9, shape, generator=gen, dtype=dtype)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen, dtype=torch.float32).to(dtype)
    return torch.randint(-4, 5, shape, generator=gen, dtype=dtype)


class _Builder:
    """Grows one model line by line, keeping only lines that run eagerly."""

    def __init__(self, rng: random.Random, inputs: list[torch.Tensor]) -> None:
        self.rng = rng
        self.values: dict[str, torch.Tensor] = {f"v{i}": t for i, t in enumerate(inputs)}
        self.lines: list[str] = []
        self.weights: dict[str, torch.Tensor] = {}

    def pick(self) -> tuple[str, torch.Tensor]:
        # Recent values more often, so the ops stack up.
        names = list(self.values)
        name = names[-1] if self.rng.random() < 0.6 else self.rng.choice(names)
        return name, self.values[name]

    def partner(self, x: torch.Tensor) -> str | None:
        """An earlier value broadcastable with ``x``, or None."""
        names = [n for n, t in self.values.items() if _broadcastable(t.shape, x.shape)]
        return self.rng.choice(names) if names else None

    def weight(self, shape: tuple[int, ...], dtype: torch.dtype) -> str:
        name = f"w{len(self.weights)}"
        self.weights[name] = random_tensor(self.rng, shape, dtype)
        return f"self.{name}"

    def try_line(self, expr: str) -> bool:
        env = {**self.values, "self": self.weights_view()}
        try:
            with torch.no_grad():
                out = eval(expr, {"torch": torch, "F": torch.nn.functional}, env)
        except Exception:  # noqa: BLE001 - an op eager rejects is simply not generated
            return False
        if not isinstance(out, torch.Tensor) or out.numel() > 4096:
            return False
        name = f"v{len(self.values)}"
        self.values[name] = out
        self.lines.append(f"    {name} = {expr}")
        return True

    def weights_view(self) -> Any:
        return type("W", (), dict(self.weights))


def _broadcastable(a: torch.Size, b: torch.Size) -> bool:
    return all(x == y or x == 1 or y == 1 for x, y in zip(a[::-1], b[::-1]))


def _dim(rng: random.Random, x: torch.Tensor) -> int:
    """A valid dim of ``x`` (0-d tensors accept 0 and -1), sometimes negative."""
    rank = max(x.dim(), 1)
    d = rng.randrange(rank)
    return d - rank if rng.random() < 0.3 else d


# Each op proposes a line for one chosen value ``x`` named ``n``; returns None when it
# does not apply. The families follow the issue: elementwise, matmul/conv,
# reshape/transpose/cat/slice/split/chunk/roll, reductions, indexing.
Op = Callable[[_Builder, str, torch.Tensor], "str | None"]


def _unary(b: _Builder, n: str, x: torch.Tensor) -> str | None:
    floats = ["torch.sigmoid({})", "torch.tanh({})", "torch.relu({})", "torch.sin({})",
              "torch.exp({}.clamp(-3, 3))", "F.gelu({})", "torch.floor({})", "F.celu({})",
              "torch.sqrt({}.abs())", "F.silu({})", "F.leaky_relu({}, 0.1)"]
    numbers = ["-{}", "torch.abs({})", "torch.square({})", "{} ** 2", "{}.clamp({lo}, {hi})",
               "torch.sign({})", "{} * {f}", "{} + {f}", "{} / {f}", "{} * {i}", "{} - {i}",
               "torch.clamp_min({}, {lo})", "{} // 2", "{} % 3"]
    bools = ["~{}", "torch.logical_not({})"]
    if x.dtype == torch.bool:
        template = b.rng.choice(bools)
    elif x.dtype.is_floating_point:
        template = b.rng.choice(floats + numbers)
    else:
        template = b.rng.choice(numbers)
    return template.format(n, lo=b.rng.randint(-3, 0), hi=b.rng.randint(1, 4),
                           f=b.rng.choice([2.5, 0.5, -1.5, 3.0]), i=b.rng.randint(1, 3))


def _binary(b: _Builder, n: str, x: torch.Tensor) -> str | None:
    other = b.partner(x)
    if other is None:
        return None
    ops = ["{} + {}", "{} * {}", "{} - {}", "torch.maximum({}, {})", "torch.minimum({}, {})",
           "({} > {})", "({} == {})", "torch.where({0} > 0, {0}, {1})",
           "torch.where({1} > 0, {0}, {1})", "torch.logical_and({0} > 0, {1} > 0)",
           "torch.atan2({0}, {1})", "{} / {}", "torch.pow({}, 2)"]
    return b.rng.choice(ops).format(n, other)


def _cast(b: _Builder, n: str, x: torch.Tensor) -> str | None:
    dtype = b.rng.choice(DTYPES)
    return b.rng.choice(["{}.to({})", "{}.type({})"]).format(n, f"torch.{str(dtype)[6:]}")


def _matmul(b: _Builder, n: str, x: torch.Tensor) -> str | None:
    if not x.dtype.is_floating_point or x.dtype == torch.float16 or x.dim() == 0:
        return None
    rng = b.rng
    choice = rng.randrange(4)
    if choice == 0:
        w = b.weight((x.shape[-1], rng.randint(1, 4)), x.dtype)
        return f"torch.matmul({n}, {w})"
    if choice == 1:
        w = b.weight((rng.randint(1, 4), x.shape[-1]), x.dtype)
        return f"F.linear({n}, {w})"
    if choice == 2 and x.dim() == 3:
        w = b.weight((rng.randint(1, 3), x.shape[1], rng.randint(1, 2)), x.dtype)
        return f"F.conv1d({n}, {w}, padding={rng.randint(0, 1)})"
    if choice == 3 and x.dim() == 4:
        w = b.weight((rng.randint(1, 3), x.shape[1], 1, rng.randint(1, 2)), x.dtype)
        return f"F.conv2d({n}, {w}, stride={rng.randint(1, 2)})"
    return f"{n} @ {n}.transpose(-1, -2)" if x.dim() >= 2 else None


def _shape(b: _Builder, n: str, x: torch.Tensor) -> str | None:
    rng, d = b.rng, _dim(b.rng, x)
    r = x.dim()
    options = [
        f"{n}.reshape({n}.size(0), -1)" if r >= 2 else f"{n}.reshape(-1)",
        f"{n}.flatten()",
        f"{n}.transpose({d}, {_dim(rng, x)})",
        f"{n}.permute({', '.join(map(str, rng.sample(range(r), r)))})" if r else f"{n}.t()",
        f"{n}.unsqueeze({rng.randint(-r - 1, r)})",
        f"{n}.squeeze({d})",
        f"{n}.squeeze()",
        f"torch.cat([{n}, {n} * 2], {d})",
        f"torch.stack([{n}, {n}], {rng.randint(-r - 1, r)})",
        f"{n}.expand({', '.join(['2'] + ['-1'] * r)})",
        f"{n}.flip({d})",
        f"torch.roll({n}, {rng.randint(-4, 4)}, {d})",
        f"torch.roll({n}, {rng.randint(-4, 4)})",
        f"torch.movedim({n}, {d}, {_dim(rng, x)})",
        f"{n}.repeat({', '.join(str(rng.randint(1, 2)) for _ in range(r))})" if r else None,
    ]
    return rng.choice([o for o in options if o])


def _slice(b: _Builder, n: str, x: torch.Tensor) -> str | None:
    rng = b.rng
    if x.dim() == 0:
        return None
    d = _dim(rng, x)
    size = x.shape[d]
    lead = ":, " * (d % x.dim())
    options = [
        f"torch.split({n}, {rng.randint(1, 4)}, {d})[{rng.choice([0, -1])}]",
        f"torch.chunk({n}, {rng.randint(1, 3)}, {d})[{rng.choice([0, -1])}]",
        f"{n}.narrow({d}, {rng.randint(0, max(size - 1, 0))}, 1)",
        f"{n}[{lead}{rng.randint(0, 1)}:]",
        f"{n}[{lead}:{rng.randint(-2, 3)}]",
        f"{n}[{lead}::{rng.randint(1, 2)}]",
        f"{n}[{lead}-1]",
        f"{n}[..., 0]",
        f"{n}[{lead}None]",
        f"{n}.unbind({d})[0]",
        f"{n}.tensor_split(2, {d})[1]",
    ]
    return rng.choice(options)


def _reduction(b: _Builder, n: str, x: torch.Tensor) -> str | None:
    rng = b.rng
    d, keep = _dim(rng, x), rng.random() < 0.3
    float_only = x.dtype.is_floating_point
    options = [
        f"{n}.sum({d}, keepdim={keep})", f"{n}.sum()", f"{n}.prod({d})",
        f"{n}.amax({d}, keepdim={keep})", f"{n}.argmax({d})", f"{n}.argmin()",
        f"{n}.max({d})[{rng.randint(0, 1)}]", f"{n}.min({d}, keepdim={keep})[0]",
        f"torch.cumsum({n}, {d})", f"{n}.any({d})" if x.dtype == torch.bool else None,
        f"torch.sort({n}, {d})[{rng.randint(0, 1)}]",
        f"torch.topk({n}, 1, {d})[{rng.randint(0, 1)}]",
    ]
    if float_only:
        options += [f"{n}.mean({d}, keepdim={keep})", f"torch.softmax({n}, {d})",
                    f"torch.log_softmax({n}, {d})", f"torch.logsumexp({n}, {d})",
                    f"torch.var_mean({n}, {d})[{rng.randint(0, 1)}]",
                    f"torch.linalg.vector_norm({n}, 2, {d})", f"{n}.std({d})",
                    f"torch.norm({n})"]
    return rng.choice([o for o in options if o])


def _indexing(b: _Builder, n: str, x: torch.Tensor) -> str | None:
    rng = b.rng
    if x.dim() == 0:
        return rng.choice([f"{n}[None]", f"{n}[...]", f"{n}.reshape(1)"])
    d = _dim(rng, x)
    size = x.shape[d]
    index = [rng.randrange(-size, size) for _ in range(rng.randint(1, 3))] if size else []
    options = [
        f"{n}.index_select({d}, torch.tensor({[i % size for i in index]}))" if index else None,
        f"{n}[torch.tensor({index})]" if index and d % x.dim() == 0 else None,
        f"{n}.masked_fill({n} > 0, 1)" if x.dtype != torch.bool else None,
        f"{n}[{n} > 0]" if x.dtype != torch.bool else f"{n}[{n}]",
        f"torch.gather({n}, {d}, torch.zeros_like({n}, dtype=torch.long))",
        f"{n}[{rng.randrange(-size, size)}]" if d % x.dim() == 0 and size else None,
        f"torch.where({n} > 0)[0]" if x.dtype != torch.bool else None,
    ]
    return rng.choice([o for o in options if o])


FAMILIES: dict[str, Op] = {
    "unary": _unary, "binary": _binary, "cast": _cast, "matmul": _matmul,
    "shape": _shape, "slice": _slice, "reduction": _reduction, "indexing": _indexing,
}


def _random_shape(rng: random.Random) -> tuple[int, ...]:
    rank = rng.choice([0, 1, 1, 2, 2, 2, 3, 3, 4])
    return tuple(rng.choice([1, 2, 3, 3, 4, 5, 6]) for _ in range(rank))


def generate(seed: str, max_steps: int = 6) -> FuzzCase:
    """The model of ``seed`` (deterministic)."""
    rng = random.Random(seed)
    first = _random_shape(rng)
    shapes = [first]
    if rng.random() < 0.4:  # a second input, broadcast-compatible with the first
        shapes.append(tuple(s if rng.random() < 0.7 else 1 for s in first[rng.randint(0, 1):]))
    dtypes = [rng.choice(INPUT_DTYPES) for _ in shapes]
    inputs = [random_tensor(rng, s, t) for s, t in zip(shapes, dtypes)]
    builder = _Builder(rng, inputs)
    for _ in range(rng.randint(1, max_steps)):
        for _attempt in range(8):
            name, value = builder.pick()
            expr = FAMILIES[rng.choice(list(FAMILIES))](builder, name, value)
            if expr and builder.try_line(expr):
                break
    steps = list(builder.values)[len(inputs):]
    if not steps:  # nothing ran: a last plain op so every model has a body
        builder.try_line("v0.clone()")
        steps = list(builder.values)[len(inputs):]
    outputs = [steps[-1]] + ([rng.choice(steps[:-1])] if len(steps) > 1 and
                             rng.random() < 0.3 else [])
    names = ", ".join(f"v{i}" for i in range(len(inputs)))
    source = "\n".join([f"def forward(self, {names}):", *builder.lines,
                        f"    return {', '.join(outputs)}", ""])
    resized, second = _second_size(rng, source, builder.weights, inputs)
    axes = {f"v{i}": [d for d, s in enumerate(t.shape) if s in resized]
            for i, t in enumerate(inputs)}
    return FuzzCase(seed, source, builder.weights, tuple(inputs), second,
                    {k: v for k, v in axes.items() if v}, resized)


def _second_size(rng: random.Random, source: str, weights: dict[str, torch.Tensor],
                 inputs: list[torch.Tensor]) -> tuple[dict[int, int], tuple[torch.Tensor, ...]
                                                       | None]:
    """Sizes to make dynamic (old -> new) and the inputs at the new sizes; sizes whose
    change eager rejects are dropped."""
    sizes = sorted({s for t in inputs for s in t.shape if s > 1})
    resized = {s: rng.choice([n for n in range(2, 8) if n != s]) for s in sizes
               if rng.random() < 0.7}
    model = build_module(source, weights)
    while resized:
        second = tuple(random_tensor(rng, tuple(resized.get(s, s) for s in t.shape), t.dtype)
                       for t in inputs)
        try:
            with torch.no_grad():
                model(*second)
            return resized, second
        except Exception:  # noqa: BLE001 - this size cannot change: keep it static
            resized.pop(rng.choice(list(resized)))
    return {}, None
