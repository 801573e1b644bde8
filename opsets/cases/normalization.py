"""Test cases of the ``oxport.normalization`` pack (imported by the op-test runner only)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from oxport.opsets.normalization import pack


def _randn(*shape: int, dtype: torch.dtype = torch.float32):
    return lambda: torch.randn(*shape).to(dtype)


def _affine_module(module: torch.nn.Module) -> torch.nn.Module:
    """``module`` with random (non-trivial) affine parameters and running stats."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for tensor in [*module.parameters(), *module.buffers()]:
            if tensor.is_floating_point():
                tensor.copy_(torch.rand(tensor.shape, generator=generator) + 0.5)
    return module


class _TrainingBatchNorm(torch.nn.Module):
    """Batch norm with batch statistics (BatchNorm1d would also count batches with add_)."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = _affine_module(torch.nn.BatchNorm1d(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = self.norm
        return F.batch_norm(x, n.running_mean, n.running_var, n.weight, n.bias,
                            training=self.training, momentum=0.2)


pack.case("aten::batch_norm", _affine_module(torch.nn.BatchNorm2d(3)), (2, 3, 4, 4))
pack.case("aten::batch_norm", _affine_module(torch.nn.BatchNorm1d(3, affine=False)), (4, 3),
          name="2d_no_affine")
pack.case("aten::_native_batch_norm_legit_no_training",
          lambda x, w, b, mean, var: torch.ops.aten._native_batch_norm_legit_no_training(
              x, w, b, mean, var, 0.1, 1e-5)[0],
          (2, 3, 4, 4), (3,), (3,), (3,), lambda: torch.rand(3) + 0.5)
pack.case("aten::batch_norm", _TrainingBatchNorm(), (2, 3, 5), name="training", training=True)
pack.case("aten::batch_norm", torch.nn.BatchNorm3d(2, track_running_stats=False),
          (2, 2, 3, 3, 3), name="no_running_stats")
pack.case("aten::instance_norm", torch.nn.InstanceNorm2d(3), (2, 3, 4, 5))
pack.case("aten::instance_norm", _affine_module(torch.nn.InstanceNorm1d(3, affine=True)),
          (2, 3, 6), name="affine")
pack.case("aten::instance_norm",
          _affine_module(torch.nn.InstanceNorm2d(3, affine=True, track_running_stats=True)),
          (2, 3, 4, 4), name="running_stats")
pack.case("aten::layer_norm", _affine_module(torch.nn.LayerNorm(6)), (2, 3, 6))
pack.case("aten::layer_norm", torch.nn.LayerNorm([3, 4], elementwise_affine=False),
          (2, 3, 4), name="2axes_no_affine")
pack.case("aten::layer_norm", _affine_module(torch.nn.LayerNorm(8, bias=False)), (1, 5, 8),
          name="no_bias")
pack.case("aten::layer_norm", _affine_module(torch.nn.LayerNorm(8)).half(),
          _randn(2, 5, 8, dtype=torch.float16), name="fp16", rtol=1e-2, atol=1e-2)
pack.case("aten::layer_norm", _affine_module(torch.nn.LayerNorm(6)), (2, 3, 6),
          name="dynamic", input_names=["x"], dynamic_axes={"x": {0: "batch", 1: "seq"}})
pack.case("aten::native_layer_norm",
          lambda x, w, b: torch.native_layer_norm(x, [4], w, b, 1e-5), (2, 3, 4), (4,), (4,))
pack.case("aten::group_norm", _affine_module(torch.nn.GroupNorm(2, 4)), (2, 4, 3, 3))
pack.case("aten::group_norm", torch.nn.GroupNorm(3, 6, affine=False), (2, 6, 5), name="3d")
pack.case("aten::group_norm", _affine_module(torch.nn.GroupNorm(1, 2)), (1, 2, 2, 3, 2),
          name="5d_one_group")
pack.case("aten::group_norm", _affine_module(torch.nn.GroupNorm(2, 4)), (2, 4, 3, 3),
          name="dynamic", input_names=["x"], dynamic_axes={"x": {0: "n", 2: "h", 3: "w"}})
pack.case("aten::rms_norm", _affine_module(torch.nn.RMSNorm(6)), (2, 3, 6))
pack.case("aten::rms_norm", torch.nn.RMSNorm([3, 6], eps=1e-5, elementwise_affine=False),
          (2, 3, 6), name="2axes_no_affine")
pack.case("aten::rms_norm", _affine_module(torch.nn.RMSNorm(8)).half(),
          _randn(2, 5, 8, dtype=torch.float16), name="fp16", rtol=1e-2, atol=1e-2)


# -- a LayerNorm of a residual sum, which the ort target fuses into SkipLayerNormalization
# (plugins/targets/norms.py) -----------------------------------------------------------------
class _ResidualLayerNorm(torch.nn.Module):
    """BERT's output block: ``LayerNorm(dense(x) + residual)``, the sum read again."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.dense, self.norm = torch.nn.Linear(8, 8), torch.nn.LayerNorm(8)

    def forward(self, x: torch.Tensor, residual: torch.Tensor):
        total = self.dense(x) + residual
        return self.norm(total), total * 2


pack.case("aten::layer_norm", _ResidualLayerNorm, (2, 3, 8), (2, 3, 8),
          name="residual_layer_norm_ort", export_kwargs={"target": "ort"}, atol=1e-5)
