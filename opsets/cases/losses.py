"""Test cases of the ``oxport.losses`` pack (imported by the op-test runner only)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from oxport.opsets.losses import pack


def _unit(*shape: int):
    """Probabilities in (0, 1)."""
    return lambda: torch.rand(*shape).clamp(0.05, 0.95)


def _signs(*shape: int):
    return lambda: torch.randint(0, 2, shape).float() * 2 - 1


pack.case("aten::mse_loss", F.mse_loss, (3, 4), (3, 4))
pack.case("aten::mse_loss", lambda x, t: F.mse_loss(x, t, reduction="none"), (2, 3), (2, 3),
          name="none")
pack.case("aten::l1_loss", lambda x, t: F.l1_loss(x, t, reduction="sum"), (3, 4), (3, 4))
pack.case("aten::smooth_l1_loss", lambda x, t: F.smooth_l1_loss(x, t, beta=0.5), (3, 4), (3, 4))
pack.case("aten::smooth_l1_loss", lambda x, t: torch.ops.aten.smooth_l1_loss(x, t, 0, 0.0),
          (3, 4), (3, 4), name="beta0")  # F.smooth_l1_loss calls l1_loss itself
pack.case("aten::huber_loss", lambda x, t: F.huber_loss(x, t, reduction="none", delta=0.6),
          (3, 4), (3, 4))
pack.case("aten::binary_cross_entropy", F.binary_cross_entropy, _unit(3, 4), _unit(3, 4))
pack.case("aten::binary_cross_entropy",
          lambda x, t, w: F.binary_cross_entropy(x, t, weight=w, reduction="none"),
          lambda: torch.tensor([0.0, 0.3, 1.0]), _unit(3), (3,), name="weight_saturated",
          min_opset=8)  # F.binary_cross_entropy expands the weight
pack.case("aten::binary_cross_entropy_with_logits", F.binary_cross_entropy_with_logits,
          lambda: torch.randn(3, 4) * 30, _unit(3, 4), name="large_logits")
pack.case("aten::binary_cross_entropy_with_logits",
          lambda x, t, w, p: F.binary_cross_entropy_with_logits(x, t, weight=w, pos_weight=p,
                                                                reduction="sum"),
          (3, 4), _unit(3, 4), (4,), lambda: torch.rand(4) + 0.5, name="weights")
pack.case("aten::binary_cross_entropy_with_logits",
          lambda x, t, p: F.binary_cross_entropy_with_logits(x, t.float(), pos_weight=p),
          (2, 3), lambda: torch.randint(0, 2, (2, 3)), lambda: torch.tensor([2, 1, 3]),
          name="int_targets_and_pos_weight")
pack.case("aten::kl_div", lambda x, t: F.kl_div(x, t, reduction="batchmean"),
          lambda: torch.randn(3, 4).log_softmax(1),
          lambda: torch.tensor([[0.0, 0.5, 0.5, 0.0], [0.1, 0.2, 0.3, 0.4], [1.0, 0, 0, 0]]))
pack.case("aten::kl_div", lambda x, t: F.kl_div(x, t, reduction="none", log_target=True),
          (3, 4), (3, 4), name="log_target")
pack.case("aten::poisson_nll_loss", F.poisson_nll_loss, (3, 4), _unit(3, 4))
pack.case("aten::poisson_nll_loss",
          lambda x, t: F.poisson_nll_loss(x, t, log_input=False, full=True, reduction="sum"),
          _unit(3, 4), lambda: torch.rand(3, 4) * 4, name="full")
pack.case("aten::soft_margin_loss", F.soft_margin_loss, (3, 4), _signs(3, 4))
pack.case("aten::margin_ranking_loss",
          lambda a, b, t: F.margin_ranking_loss(a, b, t, margin=0.3), (5,), (5,), _signs(5))
pack.case("aten::hinge_embedding_loss",
          lambda x, t: F.hinge_embedding_loss(x, t, margin=0.5, reduction="none"),
          (3, 4), _signs(3, 4))
pack.case("aten::cosine_embedding_loss",
          lambda a, b, t: F.cosine_embedding_loss(a, b, t, margin=0.2), (3, 5), (3, 5),
          _signs(3))
pack.case("aten::multi_margin_loss", F.multi_margin_loss, (3, 4),
          lambda: torch.randint(0, 4, (3,)))
pack.case("aten::multi_margin_loss",
          lambda x, t, w: F.multi_margin_loss(x, t, p=2, margin=0.5, weight=w, reduction="none"),
          (3, 4), lambda: torch.randint(0, 4, (3,)), lambda: torch.rand(4), name="p2_weight")
pack.case("aten::multilabel_margin_loss", F.multilabel_margin_loss, (3, 4),
          lambda: torch.tensor([[3, 0, -1, 1], [1, 2, 3, 0], [-1, 2, 1, 1]]))
pack.case("aten::triplet_margin_loss", F.triplet_margin_loss, (3, 5), (3, 5), (3, 5))
pack.case("aten::triplet_margin_loss",
          lambda a, p, n: F.triplet_margin_loss(a, p, n, p=1, swap=True, reduction="none"),
          (3, 5), (3, 5), (3, 5), name="l1_swap")
pack.case("aten::pairwise_distance", F.pairwise_distance, (3, 5), (3, 5))
pack.case("aten::pairwise_distance", lambda a, b: F.pairwise_distance(a, b, p=3, keepdim=True),
          (2, 3, 5), (5,), name="p3_broadcast_keepdim")
pack.case("aten::cosine_similarity", F.cosine_similarity, (3, 5), (3, 5))
pack.case("aten::cosine_similarity", lambda a, b: F.cosine_similarity(a, b, dim=-1, eps=0.5),
          (2, 3, 4), (3, 4), name="broadcast_eps")
pack.case("aten::pairwise_distance", lambda a, b: F.pairwise_distance(a, b),
          lambda: torch.randint(-9, 9, (5, 10)), lambda: torch.randint(-9, 9, (5, 10)),
          name="ints")
