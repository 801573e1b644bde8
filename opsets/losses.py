"""Losses as model outputs (regression, binary, divergence, margin and ranking losses) and
the distances they use (``pairwise_distance``, ``cosine_similarity``).

Each is written with the elementwise ops and reductions PyTorch's own kernel computes;
``reduction`` is 0 (none), 1 (mean over every element) or 2 (sum). ``nll_loss`` and
``cross_entropy_loss`` live in the nn pack.
"""

from __future__ import annotations

import math

import torch

from oxport import OpPack
from oxport import symbolic_helper as sh
from oxport.ir import Type, Value
from oxport.opsets.common import clamp_values, scalar

pack = OpPack("oxport.losses", cases="oxport.opsets.cases.losses")


def _dtype(x: Value) -> torch.dtype:
    return x.type().dtype() or torch.float32


def _rank(x: Value, op: str) -> int:
    rank = sh._get_tensor_rank(x)
    if rank is None:
        sh._unimplemented(op, "an input of unknown rank")
    return rank


def _reduce(g, loss: Value, reduction: int) -> Value:
    if reduction == 0:
        return loss
    return sh.reduce_helper(g, "ReduceMean" if reduction == 1 else "ReduceSum", loss, None,
                            keepdims_i=0)


def _as(g, value: Value, like: Value) -> Value:
    """``value`` in ``like``'s dtype (integer targets in float arithmetic)."""
    return sh.cast_to(g, value, _dtype(like))


def _abs_diff(g, self: Value, target: Value) -> Value:
    return g.op("Abs", g.op("Sub", self, _as(g, target, self)))


def _softplus_neg(g, x: Value) -> Value:
    """``log(1 + exp(-x))`` without overflow: ``relu(-x) + log(1 + exp(-|x|))``."""
    one = scalar(g, 1, _dtype(x))
    tail = g.op("Log", g.op("Add", one, g.op("Exp", g.op("Neg", g.op("Abs", x)))))
    return g.op("Add", g.op("Relu", g.op("Neg", x)), tail)


def _equals(g, target: Value, number: float) -> Value:
    return g.op("Equal", target, scalar(g, number, _dtype(target)))


def _where_zero(g, condition: Value, value: Value) -> Value:
    return g.op("Where", condition, value, scalar(g, 0, _dtype(value)))


# -- regression ------------------------------------------------------------------------
@pack.symbolic("aten::mse_loss", since=7)
@sh.parse_args("v", "v", "i")
def mse_loss(g, self, target, reduction=1):
    """mse_loss(Tensor self, Tensor target, int reduction=1) -> Tensor"""
    diff = g.op("Sub", self, _as(g, target, self))
    return _reduce(g, g.op("Mul", diff, diff), reduction)


@pack.symbolic("aten::l1_loss", since=7)
@sh.parse_args("v", "v", "i")
def l1_loss(g, self, target, reduction=1):
    """l1_loss(Tensor self, Tensor target, int reduction=1) -> Tensor"""
    return _reduce(g, _abs_diff(g, self, target), reduction)


@pack.symbolic("aten::smooth_l1_loss", since=9)
@sh.parse_args("v", "v", "i", "f")
def smooth_l1_loss(g, self, target, reduction=1, beta=1.0):
    """smooth_l1_loss(Tensor self, Tensor target, int reduction=1, float beta=1.) -> Tensor

    ``0.5 d^2 / beta`` below ``beta``, ``d - 0.5 beta`` above (L1 when beta is 0)."""
    d, dtype = _abs_diff(g, self, target), _dtype(self)
    if beta == 0:
        return _reduce(g, d, reduction)
    quadratic = g.op("Mul", g.op("Mul", d, d), scalar(g, 0.5 / beta, dtype))
    linear = g.op("Sub", d, scalar(g, 0.5 * beta, dtype))
    loss = g.op("Where", g.op("Less", d, scalar(g, beta, dtype)), quadratic, linear)
    return _reduce(g, loss, reduction)


@pack.symbolic("aten::huber_loss", since=9)
@sh.parse_args("v", "v", "i", "f")
def huber_loss(g, self, target, reduction=1, delta=1.0):
    """huber_loss(Tensor self, Tensor target, int reduction=1, float delta=1.) -> Tensor

    ``0.5 d^2`` below ``delta``, ``delta (d - 0.5 delta)`` above."""
    d, dtype = _abs_diff(g, self, target), _dtype(self)
    quadratic = g.op("Mul", g.op("Mul", d, d), scalar(g, 0.5, dtype))
    linear = g.op("Mul", g.op("Sub", d, scalar(g, 0.5 * delta, dtype)), scalar(g, delta, dtype))
    loss = g.op("Where", g.op("Less", d, scalar(g, delta, dtype)), quadratic, linear)
    return _reduce(g, loss, reduction)


# -- binary and divergence -------------------------------------------------------------
@pack.symbolic("aten::binary_cross_entropy", since=7)
@sh.parse_args("v", "v", "v", "i")
def binary_cross_entropy(g, self, target, weight=None, reduction=1):
    """binary_cross_entropy(Tensor self, Tensor target, Tensor? weight=None, int reduction=1) -> Tensor

    ``-(t log x + (1 - t) log(1 - x))``, each log clamped at -100 as PyTorch does."""
    dtype, target = _dtype(self), _as(g, target, self)
    one = scalar(g, 1, dtype)
    log_x = clamp_values(g, "aten::binary_cross_entropy", g.op("Log", self), -100.0, None)
    log_rest = clamp_values(g, "aten::binary_cross_entropy",
                            g.op("Log", g.op("Sub", one, self)), -100.0, None)
    loss = g.op("Sub", g.op("Mul", g.op("Sub", target, one), log_rest),
                g.op("Mul", target, log_x))
    if not sh._is_none(weight):
        loss = g.op("Mul", loss, weight)
    return _reduce(g, loss, reduction)


@pack.symbolic("aten::binary_cross_entropy_with_logits", since=7)
@sh.parse_args("v", "v", "v", "v", "i")
def binary_cross_entropy_with_logits(g, self, target, weight=None, pos_weight=None,
                                     reduction=1):
    """binary_cross_entropy_with_logits(Tensor self, Tensor target, Tensor? weight=None, Tensor? pos_weight=None, int reduction=1) -> Tensor

    ``(1 - t) x - w_pos log sigmoid(x)`` with ``w_pos = 1 + (pos_weight - 1) t``; targets
    and weights of another dtype (integers) are computed in the input's."""
    dtype, target = _dtype(self), _as(g, target, self)
    one = scalar(g, 1, dtype)
    minus_log_sigmoid = _softplus_neg(g, self)
    if not sh._is_none(pos_weight):
        pos_weight = _as(g, pos_weight, self)
        log_weight = g.op("Add", g.op("Mul", g.op("Sub", pos_weight, one), target), one)
        minus_log_sigmoid = g.op("Mul", log_weight, minus_log_sigmoid)
    loss = g.op("Add", g.op("Mul", g.op("Sub", one, target), self), minus_log_sigmoid)
    if not sh._is_none(weight):
        loss = g.op("Mul", loss, _as(g, weight, self))
    return _reduce(g, loss, reduction)


@pack.symbolic("aten::kl_div", since=9)
@sh.parse_args("v", "v", "i", "b")
def kl_div(g, self, target, reduction=1, log_target=False):
    """kl_div(Tensor self, Tensor target, int reduction=1, *, bool log_target=False) -> Tensor

    ``t (log t - x)`` (0 where t is 0; a negative t, not a distribution, gives 0 where
    PyTorch gives NaN), or ``exp(t) (t - x)`` for log targets."""
    target = _as(g, target, self)
    if log_target:
        loss = g.op("Mul", g.op("Exp", target), g.op("Sub", target, self))
    else:
        positive = g.op("Greater", target, scalar(g, 0, _dtype(self)))
        entropy = _where_zero(g, positive, g.op("Mul", target, g.op("Log", target)))
        loss = g.op("Sub", entropy, g.op("Mul", target, self))
    return _reduce(g, loss, reduction)


@pack.symbolic("aten::poisson_nll_loss", since=9)
@sh.parse_args("v", "v", "b", "b", "f", "i")
def poisson_nll_loss(g, input, target, log_input, full, eps, reduction):
    """poisson_nll_loss(Tensor input, Tensor target, bool log_input, bool full, float eps, int reduction) -> Tensor

    ``exp(x) - t x`` (log input) or ``x - t log(x + eps)``; ``full`` adds Stirling's
    approximation of ``log(t!)`` where t > 1."""
    dtype, target = _dtype(input), _as(g, target, input)
    if log_input:
        loss = g.op("Sub", g.op("Exp", input), g.op("Mul", target, input))
    else:
        loss = g.op("Sub", input, g.op("Mul", target, g.op("Log", g.op(
            "Add", input, scalar(g, eps, dtype)))))
    if full:
        stirling = g.op("Add", g.op("Sub", g.op("Mul", target, g.op("Log", target)), target),
                        g.op("Mul", scalar(g, 0.5, dtype), g.op(
                            "Log", g.op("Mul", scalar(g, 2 * math.pi, dtype), target))))
        loss = g.op("Add", loss, _where_zero(
            g, g.op("Greater", target, scalar(g, 1, dtype)), stirling))
    return _reduce(g, loss, reduction)


# -- margins and ranking ---------------------------------------------------------------
@pack.symbolic("aten::soft_margin_loss", since=7)
@sh.parse_args("v", "v", "i")
def soft_margin_loss(g, self, target, reduction=1):
    """soft_margin_loss(Tensor self, Tensor target, int reduction=1) -> Tensor

    ``log(1 + exp(-t x))``."""
    return _reduce(g, _softplus_neg(g, g.op("Mul", _as(g, target, self), self)), reduction)


@pack.symbolic("aten::margin_ranking_loss", since=7)
@sh.parse_args("v", "v", "v", "f", "i")
def margin_ranking_loss(g, input1, input2, target, margin=0.0, reduction=1):
    """margin_ranking_loss(Tensor input1, Tensor input2, Tensor target, float margin=0., int reduction=1) -> Tensor

    ``max(0, margin - t (x1 - x2))``."""
    ranked = g.op("Mul", _as(g, target, input1), g.op("Sub", input1, input2))
    loss = g.op("Relu", g.op("Sub", scalar(g, margin, _dtype(input1)), ranked))
    return _reduce(g, loss, reduction)


@pack.symbolic("aten::hinge_embedding_loss", since=11)
@sh.parse_args("v", "v", "f", "i")
def hinge_embedding_loss(g, self, target, margin=1.0, reduction=1):
    """hinge_embedding_loss(Tensor self, Tensor target, float margin=1., int reduction=1) -> Tensor

    ``x`` where t != -1 plus ``max(0, margin - x)`` where t != 1 (Equal on floats: 11)."""
    target = _as(g, target, self)
    below = g.op("Relu", g.op("Sub", scalar(g, margin, _dtype(self)), self))
    loss = g.op("Add", _where_zero(g, g.op("Not", _equals(g, target, 1)), below),
                _where_zero(g, g.op("Not", _equals(g, target, -1)), self))
    return _reduce(g, loss, reduction)


@pack.symbolic("aten::cosine_embedding_loss", since=11)
@sh.parse_args("v", "v", "v", "f", "i")
def cosine_embedding_loss(g, input1, input2, target, margin=0.0, reduction=1):
    """cosine_embedding_loss(Tensor input1, Tensor input2, Tensor target, float margin=0., int reduction=1) -> Tensor

    ``1 - cos`` where t == 1, ``max(0, cos - margin)`` where t == -1; the cosine over the
    dim after the target's, with PyTorch's 1e-12 added to each squared magnitude."""
    dtype, axis = _dtype(input1), _rank(target, "aten::cosine_embedding_loss")
    target = _as(g, target, input1)

    def summed(a: Value, b: Value) -> Value:
        return sh._reducesum_helper(g, g.op("Mul", a, b), [axis], keepdims_i=0)

    tiny = scalar(g, 1e-12, dtype)
    magnitudes = g.op("Mul", g.op("Add", summed(input1, input1), tiny),
                      g.op("Add", summed(input2, input2), tiny))
    cos = g.op("Div", summed(input1, input2), g.op("Sqrt", magnitudes))
    positive = g.op("Sub", scalar(g, 1, dtype), cos)
    negative = g.op("Relu", g.op("Sub", cos, scalar(g, margin, dtype)))
    loss = g.op("Add", _where_zero(g, _equals(g, target, 1), positive),
                _where_zero(g, _equals(g, target, -1), negative))
    return _reduce(g, loss, reduction)


@pack.symbolic("aten::multi_margin_loss", since=9)
@sh.parse_args("v", "v", "f", "f", "v", "i")
def multi_margin_loss(g, self, target, p=1.0, margin=1.0, weight=None, reduction=1):
    """multi_margin_loss(Tensor self, Tensor target, Scalar p=1, Scalar margin=1, Tensor? weight=None, int reduction=1) -> Tensor

    ``sum over j != y of max(0, margin - x[y] + x[j])^p (* weight[y]) / C`` for (N, C)."""
    if _rank(self, "aten::multi_margin_loss") != 2 or p not in (1, 2):
        sh._unimplemented("aten::multi_margin_loss", "inputs that are not (N, C), or p not 1 or 2")
    dtype, classes = _dtype(self), sh._get_tensor_dim_size(self, 1)
    if classes is None:
        sh._unimplemented("aten::multi_margin_loss", "a dynamic number of classes")
    labels = sh._unsqueeze_helper(g, sh.cast_to(g, target, torch.int64), [1])
    is_label = g.op("Equal", labels, g.constant(torch.arange(classes).unsqueeze(0)))
    picked = sh._reducesum_helper(g, _where_zero(g, is_label, self), [1])
    z = g.op("Relu", g.op("Add", g.op("Sub", scalar(g, margin, dtype), picked), self))
    if p == 2:
        z = g.op("Mul", z, z)
    if not sh._is_none(weight):
        z = g.op("Mul", z, g.op("Gather", weight, labels, axis_i=0))
    others = g.op("Where", is_label, scalar(g, 0, dtype), z)
    loss = g.op("Div", sh._reducesum_helper(g, others, [1], keepdims_i=0),
                scalar(g, classes, dtype))
    return _reduce(g, loss, reduction)


@pack.symbolic("aten::multilabel_margin_loss", since=9)
@sh.parse_args("v", "v", "i")
def multilabel_margin_loss(g, self, target, reduction=1):
    """multilabel_margin_loss(Tensor self, Tensor target, int reduction=1) -> Tensor

    ``sum over targets j and non-targets k of max(0, 1 - (x[j] - x[k])) / C`` for (N, C);
    a row's targets are its labels before the first -1."""
    if _rank(self, "aten::multilabel_margin_loss") != 2:
        sh._unimplemented("aten::multilabel_margin_loss", "inputs that are not (N, C)")
    dtype, classes = _dtype(self), sh._get_tensor_dim_size(self, 1)
    if classes is None:
        sh._unimplemented("aten::multilabel_margin_loss", "a dynamic number of classes")
    target = sh.cast_to(g, target, torch.int64)
    ended = sh.cast_to(g, g.op("Less", target, g.constant(torch.tensor(0))), dtype)
    # -1s at or before each position, by a product with an upper-triangular ones matrix.
    ends_so_far = g.op("MatMul", ended, g.constant(torch.ones(classes, classes,
                                                              dtype=dtype).triu()))
    valid = g.op("Less", ends_so_far, scalar(g, 0.5, dtype))  # (N, J)
    is_label = g.op("And", g.op("Equal", sh._unsqueeze_helper(g, target, [2]),
                                g.constant(torch.arange(classes).view(1, 1, -1))),
                    sh._unsqueeze_helper(g, valid, [2]))  # (N, J, C)
    labelled = sh.cast_to(g, is_label.setType(Type.tensor(torch.bool)), dtype)
    is_target = sh.reduce_helper(g, "ReduceMax", labelled, [1], keepdims_i=1)  # (N, 1, C)
    picked = sh._reducesum_helper(g, g.op("Mul", labelled, sh._unsqueeze_helper(g, self, [1])),
                                  [2])  # (N, J, 1)
    hinge = g.op("Relu", g.op("Add", g.op("Sub", scalar(g, 1, dtype), picked),
                              sh._unsqueeze_helper(g, self, [1])))
    pairs = g.op("Mul", g.op("Mul", hinge, g.op("Sub", scalar(g, 1, dtype), is_target)),
                 sh.cast_to(g, sh._unsqueeze_helper(g, valid, [2]).setType(
                     Type.tensor(torch.bool)), dtype))
    loss = g.op("Div", sh._reducesum_helper(g, pairs, [1, 2], keepdims_i=0),
                scalar(g, classes, dtype))
    return _reduce(g, loss, reduction)


@pack.symbolic("aten::triplet_margin_loss", since=7)
@sh.parse_args("v", "v", "v", "f", "f", "f", "b", "i")
def triplet_margin_loss(g, anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6, swap=False,
                        reduction=1):
    """triplet_margin_loss(Tensor anchor, Tensor positive, Tensor negative, float margin=1., float p=2., float eps=9.9999999999999995e-07, bool swap=False, int reduction=1) -> Tensor

    ``max(0, margin + d(a, p) - d(a, n))``, ``d(a, n)`` the smaller of it and ``d(p, n)``
    with ``swap``."""
    near = _pairwise_distance(g, anchor, positive, p, eps, False)
    far = _pairwise_distance(g, anchor, negative, p, eps, False)
    if swap:
        far = g.op("Min", far, _pairwise_distance(g, positive, negative, p, eps, False))
    loss = g.op("Relu", g.op("Sub", g.op("Add", scalar(g, margin, _dtype(anchor)), near), far))
    return _reduce(g, loss, reduction)


# -- distances -------------------------------------------------------------------------
def _pairwise_distance(g, x1: Value, x2: Value, p: float, eps: float, keepdim: bool) -> Value:
    """Integer inputs are computed in float32, as adding ``eps`` promotes them in eager."""
    if not _dtype(x1).is_floating_point:
        x1, x2 = sh.cast_to(g, x1, torch.float32), sh.cast_to(g, x2, torch.float32)
    diff = g.op("Add", g.op("Sub", x1, x2), scalar(g, eps, _dtype(x1)))
    rank = max(_rank(x1, "aten::pairwise_distance"), _rank(x2, "aten::pairwise_distance"))
    diff.setType(Type.tensor(_dtype(x1), [None] * rank))
    return g.run_symbolic("aten::linalg_vector_norm", diff, p, [rank - 1], keepdim, None,
                          type_=Type.tensor(_dtype(x1)))


@pack.symbolic("aten::pairwise_distance", since=7)
@sh.parse_args("v", "v", "f", "f", "b")
def pairwise_distance(g, x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """pairwise_distance(Tensor x1, Tensor x2, float p=2., float eps=9.9999999999999995e-07, bool keepdim=False) -> Tensor

    The p-norm of ``x1 - x2 + eps`` over the last dim."""
    return _pairwise_distance(g, x1, x2, p, eps, keepdim)


@pack.symbolic("aten::cosine_similarity", since=7)
@sh.parse_args("v", "v", "i", "f")
def cosine_similarity(g, x1, x2, dim=1, eps=1e-8):
    """cosine_similarity(Tensor x1, Tensor x2, int dim=1, float eps=1e-08) -> Tensor

    ``sum(x1 / max(|x1|, eps) * x2 / max(|x2|, eps))`` over ``dim``, as PyTorch computes it."""
    ranks = [_rank(x, "aten::cosine_similarity") for x in (x1, x2)]
    rank = max(ranks)
    axis = dim % rank

    def unit(x: Value, own_rank: int) -> Value:
        if own_rank < rank:  # broadcast from the right, as PyTorch does
            x = sh._unsqueeze_helper(g, x, list(range(rank - own_rank)))
        norm = sh.reduce_helper(g, "ReduceL2", x, [axis], keepdims_i=1)
        return g.op("Div", x, clamp_values(g, "aten::cosine_similarity", norm.setType(
            Type.tensor(_dtype(x1))), eps, None))

    return sh._reducesum_helper(g, g.op("Mul", unit(x1, ranks[0]), unit(x2, ranks[1])), [axis],
                                keepdims_i=0)
