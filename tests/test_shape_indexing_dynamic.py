"""Shape and indexing exports run at a second input size (dynamic axes).

The op cases run ONNX Runtime on the traced inputs only; these check that the
shape/indexing/scatter symbolics read sizes at run time instead of baking in the
traced ones, and that indexed assignment (the seed's write patterns) exports.
"""

from __future__ import annotations

import warnings

import onnxruntime as ort
import pytest
import torch

import oxport
from oxport.errors import UnsupportedOperatorError
from oxport.testing import as_module, compare, to_numpy


def _long(*data):
    return torch.tensor(data)


def _put_seed(data, new_data):
    data[1] = new_data
    return data


def _put_rows(x, i, v):
    x[i] = v
    return x


def _put_apart(x, i, j, v):
    x[i, :, j] = v
    return x


def _copy_broadcast_from_size(x):
    x[:, x.size(0):] = torch.tensor([1.0, 2.0, 3.0])  # the trace expands to (2, 3, 3)
    return x


def _put_broadcast(x, i, v):
    x[i, 1:3] = v
    return x


def _copy_columns(x, v):
    x[:, 1:] = v
    return x * 2


# name, model, (inputs at the traced size), (inputs at a second size), dynamic_axes, opsets
CASES = [
    ("expand", lambda x: x.expand(2, -1, 4), ((3, 1),), ((5, 1),), {"x": [0]}, [8, 20]),
    ("expand_size", lambda x, y: x.expand(y.size(0), -1), ((1, 3), (4, 2)),
     ((1, 3), (6, 2)), {"y": [0]}, [8, 20]),
    ("slice_end", lambda x: x[:, x.size(1) - 2:], ((3, 4),), ((2, 7),), {"x": [0, 1]}, [10, 20]),
    ("narrow_negative", lambda x: x.narrow(1, -2, 2), ((3, 4),), ((2, 6),), {"x": [0, 1]},
     [7, 20]),
    ("select_negative", lambda x: x[:, -1], ((3, 4),), ((2, 6),), {"x": [0, 1]}, [9, 20]),
    ("index_negative", lambda x, i: x[i, -1], ((4, 3), _long(-1, 0)), ((6, 5), _long(-2, 3)),
     {"x": [0, 1], "i": [0]}, [9, 20]),
    ("index_two", lambda x, i, j: x[:, i, j], ((2, 4, 5), _long(1, -2), _long(0, 4)),
     ((3, 6, 7), _long(5, -1, 0), _long(6, 1, 2)), {"x": [0, 1, 2], "i": [0], "j": [0]},
     [9, 20]),
    ("index_mask", lambda x, m: x[m], ((3, 4), torch.rand(3, 4) > 0.5),
     ((5, 2), torch.rand(5, 2) > 0.5), {"x": [0, 1], "m": [0, 1]}, [9, 20]),
    ("unflatten", lambda x: x.unflatten(-1, (2, -1)), ((2, 4),), ((3, 8),), {"x": [0, 1]},
     [7, 20]),
    ("repeat_interleave", lambda x: x.repeat_interleave(2, dim=1), ((2, 3),), ((4, 1),),
     {"x": [0, 1]}, [8, 20]),
    ("flip_roll", lambda x: x.flip(0).roll(1, 1), ((2, 3),), ((4, 5),), {"x": [0, 1]}, [10, 20]),
    ("triu", lambda x: x.triu(1), ((3, 4),), ((5, 2),), {"x": [0, 1]}, [11, 14, 20]),
    ("diagonal", lambda x: x.diagonal(-1), ((3, 4),), ((6, 3),), {"x": [0, 1]}, [11, 20]),
    ("chunk", lambda x: x.chunk(2, 1), ((2, 4),), ((3, 6),), {"x": [0, 1]}, [18, 20]),
    ("squeeze_dim_dynamic", lambda x: x.squeeze(1) * 2, ((2, 1, 4),), ((2, 3, 4),),
     {"x": [0, 1, 2]}, [11, 13, 20]),
    ("squeeze_dim_not_one_when_traced", lambda x: x.squeeze(-1) * 2, ((2, 2, 4),),
     ((2, 2, 1),), {"x": [0, 1, 2]}, [11, 13, 20]),
    ("squeeze_all", lambda x: x.squeeze() * 2, ((1, 3, 1),), ((1, 1, 1),), {"x": [1]}, [11, 13, 20]),
    ("squeeze_all_data_dependent", lambda x: x[x > 0][None].squeeze(),
     (torch.tensor([1.0, -1.0, -2.0]),), (torch.tensor([1.0, 2.0, -1.0]),), {}, [11, 20]),
    ("squeeze_all_of_nonzero", lambda x: torch.where(x > 0)[0].squeeze(),
     (torch.tensor([1.0, -2.0]),), (torch.tensor([-1.0, -3.0]),), {}, [11, 20]),
    ("squeeze_dim_data_dependent", lambda x: torch.where(x > 0)[0].squeeze(-1),
     (torch.tensor([-1.0, -2.0]),), (torch.tensor([-1.0, -3.0]),), {}, [11, 20]),
    # Sizes computed from tensor values: no dynamic axes, yet they vary.
    ("squeeze_size_from_values", lambda d, e: torch.zeros(d[0], e[0]).squeeze(0),
     (_long(1), _long(4)), (_long(3), _long(4)), {}, [11, 13, 20]),
    ("squeeze_size_from_values_not_one", lambda d, e: torch.zeros(d[0], e[0]).squeeze(0),
     (_long(3), _long(4)), (_long(1), _long(3)), {}, [11, 20]),
    ("squeeze_computed_from_sized_by_values",
     lambda d, x: (torch.ones(2, d[0] + 1) * 2)[:, None].squeeze(2) * x,
     (_long(0), (2, 1)), (_long(2), (2, 1)), {}, [11, 20]),
    ("squeeze_arange_from_values", lambda d: torch.arange(d[0])[None].squeeze(1),
     (_long(1),), (_long(4),), {}, [11, 20]),
    ("expand_as", lambda x, y: x.expand_as(y) + y, ((1, 4), (3, 4)), ((1, 6), (5, 6)),
     {"x": [1], "y": [0, 1]}, [8, 20]),
    ("pixel_unshuffle_channels", lambda x: torch.nn.functional.pixel_unshuffle(x, 2),
     ((2, 16, 4, 6),), ((4, 32, 8, 4),), {"x": [0, 1, 2, 3]}, [11, 20]),
    ("pixel_shuffle_channels", lambda x: torch.nn.functional.pixel_shuffle(x, 2),
     ((2, 16, 4, 6),), ((1, 8, 3, 2),), {"x": [0, 1, 2, 3]}, [11, 20]),
    ("pixel_unshuffle", lambda x: torch.nn.functional.pixel_unshuffle(x, 2), ((1, 2, 4, 4),),
     ((2, 2, 6, 8),), {"x": [0, 2, 3]}, [11, 20]),
    # A data-dependent size: the traced one sets the number of pieces, their sizes are read.
    ("split_data_dependent", lambda x: torch.split(x[x > 0], 2)[0] * 2,
     (torch.tensor([1.0, -1.0, 2.0, 3.0, -4.0]),), (torch.tensor([1.0, 2.0, 3.0, 4.0, -4.0]),),
     {}, [11, 13, 20]),
    ("chunk_data_dependent", lambda x: torch.chunk(x[x > 0], 2)[1] * 2,
     (torch.tensor([1.0, -1.0, 2.0, 3.0, -4.0]),), (torch.tensor([1.0, 2.0, 3.0, 4.0, -4.0]),),
     {}, [11, 13, 20]),
    ("slice_tensor_index", lambda x, i: x[i:], ((6,), _long(2)), ((9,), _long(3)), {"x": [0]},
     [10, 20]),
    # Piece sizes read at run time (the number of pieces is the traced one).
    ("roll_past_size", lambda x: torch.roll(x, 3, 0), ((13,),), ((2,),), {"x": [0]}, [10, 20]),
    ("chunk_first", lambda x: torch.chunk(x, 3, 0)[0], ((13,),), ((7,),), {"x": [0]},
     [11, 13, 20]),
    ("chunk_fewer", lambda x: torch.chunk(x, 3, 0)[-1], ((4,),), ((2,),), {"x": [0]}, [13, 20]),
    # Traced with fewer pieces than asked for: the first stays eager's at a larger size.
    ("chunk_more_later", lambda x: torch.chunk(x, 2, 0)[0], ((1,),), ((3,),), {"x": [0]},
     [11, 13, 20]),
    ("split_last", lambda x: torch.split(x, 6, 0)[-1], ((13,),), ((14,),), {"x": [0]},
     [11, 13, 20]),
    ("tensor_split", lambda x: x.tensor_split(3, 1)[0], ((2, 7),), ((2, 8),), {"x": [1]},
     [11, 20]),
    ("index_put_seed", _put_seed, ((3, 4), (4,)), ((5, 6), (6,)), {"data": [0, 1],
                                                                    "new_data": [0]}, [11, 20]),
    ("index_put_rows", _put_rows, ((4, 3), _long(-1, 1), (2, 3)), ((6, 2), _long(0, -3, 2),
                                                                   (3, 2)),
     {"x": [0, 1], "i": [0], "v": [0, 1]}, [11, 20]),
    ("index_put_apart", _put_apart, ((4, 3, 5), _long(2, 3), _long(1, 2), (3,)),
     ((5, 2, 6), _long(4, 0), _long(5, 1), (2,)), {"x": [0, 1, 2], "v": [0]}, [11, 20]),
    ("index_put_broadcast", _put_broadcast, ((3, 4, 5), _long([0, 2], [1, 1]), (5,)),
     ((3, 4, 7), _long([0, 1], [2, 2]), (7,)), {"x": [2], "v": [0]}, [11, 20]),
    ("copy_slice", _copy_columns, ((3, 4), (3, 3)), ((5, 2), (5, 1)),
     {"x": [0, 1], "v": [0, 1]}, [11, 20]),
    ("copy_broadcast_from_size", _copy_broadcast_from_size, ((2, 5, 3),), ((3, 4, 3),),
     {"x": [0, 1, 2]}, [11, 20]),
    ("masked_fill", lambda x, m: x.masked_fill(m, -1.0), ((3, 4), torch.rand(4) > 0.5),
     ((5, 2), torch.rand(2) > 0.5), {"x": [0, 1], "m": [0]}, [9, 20]),
    ("masked_scatter", lambda x, m, s: x.masked_scatter(m, s), ((3, 4), torch.rand(3, 4) > 0.5,
                                                                 (12,)),
     ((2, 5), torch.rand(2, 5) > 0.5, (10,)), {"x": [0, 1], "m": [0, 1], "s": [0]}, [11, 20]),
    ("index_fill", lambda x, i: x.index_fill(1, i, 2.0), ((3, 4), _long(0, 3)),
     ((2, 6), _long(5)), {"x": [0, 1], "i": [0]}, [11, 20]),
]


def _materialize(specs):
    gen = torch.Generator().manual_seed(0)
    return tuple(torch.randn(*s, generator=gen) if isinstance(s, tuple) else s for s in specs)


def _names(model, count):
    code = getattr(model, "__code__", None)
    return list(code.co_varnames[:count]) if code is not None else [f"in{i}" for i in range(count)]


@pytest.mark.parametrize("name,model,first,second,axes,opsets", CASES, ids=[c[0] for c in CASES])
def test_second_size(name, model, first, second, axes, opsets):
    first, second = _materialize(first), _materialize(second)
    names = _names(model, len(first))
    for opset in opsets:
        result = oxport.convert(as_module(model), tuple(t.clone() for t in first),
                                opset_version=opset, input_names=names, dynamic_axes=axes)
        session = ort.InferenceSession(result.model_proto.SerializeToString(),
                                       providers=["CPUExecutionProvider"])
        with torch.no_grad():
            expected = model(*(t.clone() for t in second))
        actual = session.run(None, {n: to_numpy(t) for n, t in zip(names, second)})
        compare(expected, actual, rtol=1e-4, atol=1e-5, where=f"{name}-opset{opset}")


def test_sizes_read_from_a_traced_shape_stay_the_traced_ones():
    """Without dynamic axes a size read from a shape (``x.size(0)``) is the traced one:
    squeeze removes its dim without deciding at run time, as for a constant size."""
    model = as_module(lambda x: (torch.zeros(x.size(0), 2) + x[:, :2]).squeeze(0))
    result = oxport.convert(model, (torch.randn(1, 3),), opset_version=17)
    ops = [node.op_type for node in result.model_proto.graph.node]
    assert "Squeeze" in ops and "Compress" not in ops and "Reshape" not in ops


def test_indexed_assignment_below_opset_11_names_the_opset():
    """A row put at a constant index is a Scatter at opset 10; tensor indices need opset 11."""
    with pytest.raises(UnsupportedOperatorError, match="opset 11"):
        oxport.convert(as_module(_put_rows), (torch.zeros(4, 3), _long(1, 2), torch.ones(2, 3)),
                       opset_version=10)


@pytest.mark.parametrize("model,size,axes,warns", [
    (lambda x: torch.split(x, 6, 0)[-1], (13,), {"x": [0]}, True),
    (lambda x: torch.split(x, 6, 1)[-1], (2, 13), {"x": [0]}, False),
    (lambda x: torch.chunk(x, 3, 0)[0], (13,), None, False),
    (lambda x: torch.chunk(x, 3, 0)[0], (4,), {"x": [0]}, True),  # 2 pieces, not 3
    (lambda x: torch.chunk(x, 3, 0)[0], (13,), {"x": [0]}, False),  # the 3 asked for
    (lambda x: x.unbind(0)[0], (3, 2), {"x": [0]}, True),
    (lambda x: x.squeeze(1), (1, 3), {"x": [1]}, False),  # from opset 11: 1 at run time?
    (lambda x: x.squeeze(), (1, 3), {"x": [1]}, False),  # Squeeze without axes: any size
    (lambda x: (lambda y: (y.unbind(1)[0], y))(x * 2), (3, 4), {"x": [1]}, True),
], ids=["split", "split_static_axis", "chunk_no_dynamic_axes", "chunk_fewer_pieces",
        "chunk_as_many_pieces", "unbind", "squeeze_dim",
        "squeeze_all", "unbind_of_an_output"])
def test_warns_when_a_dynamic_axis_fixes_a_traced_count(model, size, axes, warns):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        oxport.convert(as_module(model), (torch.randn(size),), input_names=["x"],
                       dynamic_axes=axes)
    messages = [str(w.message) for w in caught if "traced size" in str(w.message)]
    assert bool(messages) == warns, messages
    if warns:
        assert "dynamic_axes makes dynamic (x_dynamic_axes_1)" in messages[0]
        assert "test_shape_indexing_dynamic.py" in messages[0]
