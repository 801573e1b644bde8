"""Layer ops exported with dynamic axes, then run at a second input size.

The shared op runner compares at the traced size only; these cases check that
what the symbolics emit (sizes, pads, masks, scales) follows the new size.
"""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F

from oxport import testing


def _run_at(model, example, second, opset, dynamic_axes, rtol=1e-4, atol=1e-5):
    import onnxruntime as ort

    names = [f"in{i}" for i in range(len(example))]
    data = testing.roundtrip_bytes(testing.as_module(model), example, opset_version=opset,
                                   input_names=names, dynamic_axes=dynamic_axes)
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    actual = session.run(None, {n: testing.to_numpy(t) for n, t in zip(names, second)})
    with torch.no_grad():
        expected = model(*second)
    testing.compare(expected, actual, rtol=rtol, atol=atol)


def _spatial(*names: str) -> dict:
    return {name: {0: "n", 2: f"{name}_h", 3: f"{name}_w"} for name in names}


CASES = {
    "interpolate_scale": (lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"),
                          [(1, 2, 3, 4)], [(2, 2, 5, 3)], _spatial("in0"), 11),
    "interpolate_size_of": (lambda x, y: F.interpolate(x, size=y.shape[-2:]),
                            [(1, 2, 3, 4), (1, 1, 5, 6)], [(2, 2, 4, 2), (2, 1, 7, 3)],
                            _spatial("in0", "in1"), 11),
    "interpolate_size_of_18": (lambda x, y: F.interpolate(x, size=y.shape[-2:], mode="bicubic"),
                               [(1, 2, 3, 4), (1, 1, 5, 6)], [(2, 2, 4, 2), (2, 1, 7, 3)],
                               _spatial("in0", "in1"), 18),
    "pad_to_multiple": (lambda x: F.pad(x, (0, (4 - x.size(-1) % 4) % 4), value=1.0),
                        [(2, 3, 5)], [(1, 3, 7)], {"in0": {0: "n", 2: "len"}}, 11),
    "reflect_pad": (torch.nn.ReflectionPad2d((1, 2, 2, 0)), [(1, 2, 4, 4)], [(2, 2, 3, 5)],
                    _spatial("in0"), 11),
    "global_pools": (lambda x: F.adaptive_avg_pool2d(x, 1) + F.adaptive_max_pool2d(x, 1),
                     [(1, 2, 5, 5)], [(3, 2, 4, 7)], _spatial("in0"), 7),
    "max_pool_ceil": (torch.nn.MaxPool2d(3, 2, ceil_mode=True), [(1, 2, 8, 8)], [(1, 2, 9, 6)],
                      _spatial("in0"), 10),
    # ceil_mode changes nothing at the traced size, but does at the second one
    "max_pool_ceil_traced_without_effect": (torch.nn.MaxPool2d(3, 2, ceil_mode=True),
                                            [(1, 2, 9, 9)], [(1, 2, 8, 10)], _spatial("in0"), 10),
    "avg_pool_ceil_traced_without_effect": (torch.nn.AvgPool2d(3, 2, padding=1, ceil_mode=True),
                                            [(1, 2, 9, 9)], [(1, 2, 8, 10)], _spatial("in0"), 10),
    "pixel_shuffle": (torch.nn.PixelShuffle(2), [(1, 8, 2, 3)], [(2, 8, 4, 1)],
                      _spatial("in0"), 11),
    "pixel_unshuffle": (torch.nn.PixelUnshuffle(2), [(1, 2, 4, 6)], [(2, 2, 2, 8)],
                        _spatial("in0"), 7),
    "group_norm_decomposed": (torch.nn.GroupNorm(2, 4), [(1, 4, 3, 3)], [(2, 4, 5, 2)],
                              _spatial("in0"), 20),
    "group_norm_21": (torch.nn.GroupNorm(2, 4), [(1, 4, 3, 3)], [(2, 4, 5, 2)],
                      _spatial("in0"), 21),
    "layer_norm_17": (torch.nn.LayerNorm(6), [(1, 3, 6)], [(2, 5, 6)],
                      {"in0": {0: "n", 1: "seq"}}, 17),
    "rms_norm_23": (torch.nn.RMSNorm(6), [(1, 3, 6)], [(2, 5, 6)],
                    {"in0": {0: "n", 1: "seq"}}, 23),
    "unfold": (lambda x: x.unfold(-1, 3, 2), [(1, 2, 7)], [(2, 2, 10)],
               {"in0": {0: "n", 2: "len"}}, 11),
    "batch_stats": (torch.nn.BatchNorm1d(3, track_running_stats=False), [(4, 3, 5)],
                    [(2, 3, 7)], {"in0": {0: "n", 2: "len"}}, 7),
}

_QKV = {name: {0: "batch", 2: "seq"} for name in ("in0", "in1", "in2")}
for _opset in (11, 23):
    CASES[f"causal_attention_{_opset}"] = (
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        [(1, 2, 4, 8)] * 3, [(2, 2, 7, 8)] * 3, _QKV, _opset)
    CASES[f"masked_attention_{_opset}"] = (
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
        [(1, 2, 4, 8)] * 3 + [(1, 1, 4, 4)], [(2, 2, 6, 8)] * 3 + [(2, 1, 6, 6)],
        {**_QKV, "in3": {0: "batch", 2: "seq", 3: "seq"}}, _opset)


@pytest.mark.parametrize("name", sorted(CASES))
def test_second_size(name: str) -> None:
    model, example, second, dynamic_axes, opset = CASES[name]
    generator = torch.Generator().manual_seed(0)
    example = tuple(torch.randn(*shape, generator=generator) for shape in example)
    second = tuple(torch.randn(*shape, generator=generator) for shape in second)
    _run_at(model, example, second, opset, dynamic_axes)



def test_ceil_mode_before_opset_10_warns_on_a_dynamic_size() -> None:
    # Opset 9 pools have no ceil_mode: the end pads completing the last window come from the
    # traced size, so each dynamic spatial axis gets the traced-size warning.
    with pytest.warns(UserWarning) as caught:
        testing.roundtrip_bytes(torch.nn.MaxPool2d(3, 2, ceil_mode=True),
                                (torch.randn(1, 2, 8, 8),), opset_version=9, input_names=["x"],
                                dynamic_axes={"x": {2: "h", 3: "w"}})
    said = [str(warning.message) for warning in caught]
    for axis in ("h", "w"):
        assert [m for m in said if re.search(r"max_pool2d's ceil_mode end padding.*"
                                             rf"dynamic_axes makes dynamic \({axis}\)", m)]


def test_ceil_mode_dropping_a_window_in_the_padding_warns_on_a_dynamic_size() -> None:
    # At the traced size PyTorch's ceil mode drops a last window that would start in the
    # padding, which ONNX's shape inference would keep: ceil_mode is left out, right there
    # only, so a dynamic spatial axis gets the traced-size warning.
    with pytest.warns(UserWarning, match=r"max_pool2d's choice of ceil_mode.*"
                                         r"dynamic_axes makes dynamic"):
        testing.roundtrip_bytes(torch.nn.MaxPool2d(2, 2, padding=1, ceil_mode=True),
                                (torch.randn(1, 2, 5, 5),), opset_version=17, input_names=["x"],
                                dynamic_axes={"x": {2: "h", 3: "w"}})
