"""export_modules_as_functions: module calls as ONNX local functions.

Every export here runs the full ONNX checker (``convert`` checks by default) and
ONNX Runtime, compared with eager PyTorch.
"""

from __future__ import annotations

import collections

import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F

import oxport
from oxport import testing
from oxport.errors import InvalidExportArgumentError

RTOL, ATOL = 1e-3, 1e-5
LINEAR = ("torch.nn.modules.linear", "Linear")
LAYER_NORM = ("torch.nn.modules.normalization", "LayerNorm")


def _export(model: torch.nn.Module, *args: torch.Tensor, opset: int = 20,
            functions=True, **kwargs) -> onnx.ModelProto:
    """Export, check, run in ONNX Runtime and compare with eager; returns the model."""
    model.eval()
    proto = oxport.convert(model, args, opset_version=opset,
                           export_modules_as_functions=functions, **kwargs).model_proto
    import onnxruntime as ort
    session = ort.InferenceSession(proto.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    names = [i.name for i in session.get_inputs()]
    feeds = {**{n: state[n] for n in names[len(args):]},
             **{n: a.numpy() for n, a in zip(names, args)}}
    with torch.no_grad():
        expected = model(*args)
    testing.compare(expected, session.run(None, feeds), rtol=RTOL, atol=ATOL,
                    where=f"opset {opset}")
    return proto


def _functions(proto: onnx.ModelProto) -> dict[tuple[str, str], onnx.FunctionProto]:
    return {(f.domain, f.name): f for f in proto.functions}


def _calls(nodes, key: tuple[str, str]) -> list[onnx.NodeProto]:
    return [n for n in nodes if (n.domain, n.op_type) == key]


def _attrs(node: onnx.NodeProto) -> dict[str, object]:
    """The attribute values a node holds itself (references to function attributes left out)."""
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute
            if not a.ref_attr_name}


def _key(cls: type) -> tuple[str, str]:
    return cls.__module__, cls.__name__


# -- models -----------------------------------------------------------------------------
class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.act = torch.nn.GELU()
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class BasicBlock(torch.nn.Module):
    """A ResNet basic block: its ReLU module is called twice."""

    def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(cout)
        self.relu = torch.nn.ReLU(inplace=True)
        self.conv2 = torch.nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = torch.nn.Sequential(
                torch.nn.Conv2d(cin, cout, 1, stride, bias=False), torch.nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + identity)


class TinyResNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, 1, 1), torch.nn.ReLU())
        self.layer1 = torch.nn.Sequential(BasicBlock(8, 8), BasicBlock(8, 8))
        self.layer2 = torch.nn.Sequential(BasicBlock(8, 16, 2), BasicBlock(16, 16))
        self.pool = torch.nn.AdaptiveAvgPool2d(1)
        self.fc = torch.nn.Linear(16, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer2(self.layer1(self.stem(x)))
        return self.fc(torch.flatten(self.pool(x), 1))


def _randomize_norms(model: torch.nn.Module) -> torch.nn.Module:
    torch.manual_seed(0)
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 1.5)
    return model


class Attention(torch.nn.Module):
    heads: int

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.scale = (dim // heads) ** -0.5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).reshape(b, t, 3, self.heads, d // self.heads).permute(
            2, 0, 3, 1, 4).unbind(0)
        weights = torch.softmax(q @ k.transpose(-2, -1) * self.scale, dim=-1)
        return self.proj((weights @ v).transpose(1, 2).reshape(b, t, d))


class TransformerBlock(torch.nn.Module):
    def __init__(self, dim: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.ln2 = torch.nn.LayerNorm(dim)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 2 * dim), torch.nn.GELU(),
                                       torch.nn.Linear(2 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Transformer(torch.nn.Module):
    def __init__(self, layers: int = 12) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList([TransformerBlock() for _ in range(layers)])
        self.norm = torch.nn.LayerNorm(16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.norm(x)


class Block(torch.nn.Module):
    """A block holding a Linear and a LayerNorm."""

    def __init__(self, eps: float = 1e-5) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(6, 6)
        self.norm = torch.nn.LayerNorm(6, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.norm(self.fc(x)))


class TwoBlocks(torch.nn.Module):
    def __init__(self, eps2: float = 1e-5) -> None:
        super().__init__()
        self.first = Block()
        self.second = Block(eps2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(self.first(x))


class Annotated(torch.nn.Module):
    """PEP 526 class annotations: exported as attributes of each call."""

    mode: str
    factor: float
    sizes: tuple[int, ...]
    enabled: bool
    _private: int

    def __init__(self, factor: float) -> None:
        super().__init__()
        self.mode = "fast"
        self.factor = factor
        self.sizes = (2, 3)
        self.enabled = True
        self._private = 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.factor + 1.0


class Scaled(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = Annotated(0.5)
        self.b = Annotated(3.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.a(x))


# -- True, sets of types, nesting --------------------------------------------------------
@pytest.mark.parametrize("opset", [15, 20])
def test_true_exports_every_module_call_as_a_function(opset):
    torch.manual_seed(0)
    proto = _export(MLP(), torch.randn(3, 8), opset=opset)
    top = [(n.domain, n.op_type) for n in proto.graph.node]
    assert top == [LINEAR, ("torch.nn.modules.activation", "GELU"), LINEAR]
    assert set(_functions(proto)) == {LINEAR, ("torch.nn.modules.activation", "GELU")}
    assert proto.ir_version >= 8
    imports = {o.domain: o.version for o in proto.opset_import}
    assert imports[""] == opset and imports["torch.nn.modules.linear"] == 1
    linear = _functions(proto)[LINEAR]
    assert [n.op_type for n in linear.node] == ["Gemm"]
    assert {o.domain: o.version for o in linear.opset_import} == {"": opset}
    # Weights are function inputs; the initializers stay in the main graph.
    assert len(linear.input) == 3
    assert {i.name for i in proto.graph.initializer} == {
        "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}
    assert list(_calls(proto.graph.node, LINEAR)[0].input[1:]) == ["fc1.weight", "fc1.bias"]


def test_false_keeps_flat_nodes():
    torch.manual_seed(0)
    proto = _export(MLP(), torch.randn(3, 8), functions=False)
    assert not proto.functions
    assert {n.domain for n in proto.graph.node} == {""}
    assert {o.domain for o in proto.opset_import} == {""}


@pytest.mark.parametrize("opset", [15, 20])
def test_resnet_like_blocks(opset):
    model = _randomize_norms(TinyResNet())
    proto = _export(model, torch.randn(2, 3, 16, 16), opset=opset)
    functions = _functions(proto)
    sequential = ("torch.nn.modules.container", "Sequential")
    block_names = {name for domain, name in functions if domain == BasicBlock.__module__}
    # Blocks with and without a downsample branch have different bodies.
    assert block_names == {"BasicBlock", "BasicBlock.1"}
    # stem, layer1, layer2 and the downsample branch: four Sequential bodies.
    assert [n.op_type for n in proto.graph.node] == [
        "Sequential", "Sequential.1", "Sequential.3", "AdaptiveAvgPool2d", "Flatten", "Linear"]
    assert {name for domain, name in functions if domain == sequential[0]} == {
        "Sequential", "Sequential.1", "Sequential.2", "Sequential.3"}
    # The block's ReLU module is called twice: two calls of one ReLU function.
    body = functions[_key(BasicBlock)]
    relu = ("torch.nn.modules.activation", "ReLU")
    assert len(_calls(body.node, relu)) == 2
    assert [n.op_type for n in functions[relu].node] == ["Relu"]
    # The stem's Conv2d has a bias, the blocks' do not: two Conv2d functions. The blocks'
    # 3x3 and the downsample's 1x1 share one, with the kernel as an inferred attribute.
    conv = ("torch.nn.modules.conv", "Conv2d.1")
    assert [n.op_type for n in functions[conv[:1] + ("Conv2d",)].node] == ["Conv"]
    (node,) = functions[conv].node
    assert {a.name: a.ref_attr_name for a in node.attribute if a.ref_attr_name} == {
        "kernel_shape": "inferred::Conv_kernel_shape", "pads": "inferred::Conv_pads",
        "strides": "inferred::Conv_strides"}
    first = _attrs(_calls(body.node, conv)[0])
    assert first["kernel_size"] == [3, 3] and first["inferred::Conv_kernel_shape"] == [3, 3]
    downsample = _functions(proto)[(sequential[0], "Sequential.2")]
    assert _attrs(_calls(downsample.node, conv)[0])["inferred::Conv_kernel_shape"] == [1, 1]


def test_a_set_of_types_exports_only_those():
    model = _randomize_norms(TinyResNet())
    proto = _export(model, torch.randn(1, 3, 8, 8), functions={BasicBlock, torch.nn.Linear})
    assert {name for _, name in _functions(proto)} == {"BasicBlock", "BasicBlock.1", "Linear"}
    top = collections.Counter(n.op_type for n in proto.graph.node)
    assert top["BasicBlock"] + top["BasicBlock.1"] == 4 and top["Linear"] == 1
    assert top["Conv"] == 1 and top["Relu"] == 1  # the stem stays flat
    body = _functions(proto)[_key(BasicBlock)]
    assert collections.Counter(n.op_type for n in body.node) == {
        "Conv": 2, "BatchNormalization": 2, "Relu": 2, "Add": 1}


def test_a_listed_type_inside_an_unlisted_module_is_a_top_level_call():
    torch.manual_seed(0)
    proto = _export(TwoBlocks(), torch.randn(2, 6), functions={torch.nn.LayerNorm})
    assert set(_functions(proto)) == {LAYER_NORM}
    assert [n.op_type for n in proto.graph.node] == [
        "Gemm", "LayerNorm", "Relu", "Gemm", "LayerNorm", "Relu"]


def test_nesting_a_set_with_the_outer_type_keeps_inner_modules_flat():
    torch.manual_seed(0)
    proto = _export(TwoBlocks(), torch.randn(2, 6), functions={Block})
    assert list(_functions(proto)) == [_key(Block)]
    assert [n.op_type for n in _functions(proto)[_key(Block)].node] == [
        "Gemm", "LayerNormalization", "Relu"]
    assert [n.op_type for n in proto.graph.node] == ["Block", "Block"]


@pytest.mark.parametrize("opset", [15, 17, 20])
def test_nesting_with_true_calls_inner_functions(opset):
    torch.manual_seed(0)
    proto = _export(TwoBlocks(), torch.randn(2, 6), opset=opset)
    functions = _functions(proto)
    assert set(functions) == {_key(Block), LINEAR, LAYER_NORM}
    block = functions[_key(Block)]
    assert [(n.domain, n.op_type) for n in block.node] == [LINEAR, LAYER_NORM, ("", "Relu")]
    assert {o.domain for o in block.opset_import} == {"", LINEAR[0], LAYER_NORM[0]}
    # Functions are listed after the functions they call.
    order = [(f.domain, f.name) for f in proto.functions]
    assert order.index(LINEAR) < order.index(_key(Block))
    assert order.index(LAYER_NORM) < order.index(_key(Block))


# -- sharing ------------------------------------------------------------------------------
def test_twelve_transformer_blocks_share_one_function():
    torch.manual_seed(0)
    proto = _export(Transformer(12), torch.randn(2, 5, 16), opset=17)
    functions = _functions(proto)
    block = _key(TransformerBlock)
    assert [f for f in functions if f[1].startswith("TransformerBlock")] == [block]
    assert len(_calls(proto.graph.node, block)) == 12
    assert len(proto.graph.node) == 13  # 12 blocks and the final LayerNorm call
    body = functions[block]
    assert [(n.domain, n.op_type) for n in body.node if n.domain] == [
        LAYER_NORM, (Attention.__module__, "Attention"), LAYER_NORM,
        ("torch.nn.modules.container", "Sequential")]
    # One function per module type in all.
    assert collections.Counter(f.name for f in proto.functions) == {
        "TransformerBlock": 1, "Attention": 1, "LayerNorm": 1, "Linear": 1, "GELU": 1,
        "Sequential": 1}
    attention = _calls(body.node, (Attention.__module__, "Attention"))[0]
    assert _attrs(attention) == {"heads": 2}


def test_twelve_blocks_with_only_the_block_type():
    torch.manual_seed(0)
    proto = _export(Transformer(12), torch.randn(2, 5, 16), opset=20,
                    functions={TransformerBlock})
    assert [(f.domain, f.name) for f in proto.functions] == [_key(TransformerBlock)]
    assert [n.op_type for n in proto.graph.node] == ["TransformerBlock"] * 12 + [
        "LayerNormalization"]
    body = proto.functions[0]
    assert not [n for n in body.node if n.domain]
    # Each call passes its own block's weights.
    first, last = proto.graph.node[0], proto.graph.node[11]
    assert "blocks.0.ln1.weight" in first.input and "blocks.11.ln1.weight" in last.input


# -- attributes -----------------------------------------------------------------------------
def test_annotated_attributes_are_call_attributes():
    torch.manual_seed(0)
    proto = _export(Scaled(), torch.randn(2, 3))
    (function,) = proto.functions
    assert (function.domain, function.name) == _key(Annotated)
    first, second = _calls(proto.graph.node, _key(Annotated))
    attrs = _attrs(first)
    assert onnx.numpy_helper.to_array(attrs.pop("inferred::factor")) == np.float32(0.5)
    assert attrs == {"mode": b"fast", "factor": 0.5, "sizes": [2, 3], "enabled": 1}
    assert _attrs(second)["factor"] == 3.0
    assert {"mode", "factor", "sizes", "enabled"} <= set(function.attribute)
    assert "_private" not in function.attribute
    # The body does not read annotated attributes; the factor it multiplies by is an
    # inferred attribute, named after the module attribute that holds it.
    refs = [a.ref_attr_name for n in function.node for a in n.attribute if a.ref_attr_name]
    assert refs == ["inferred::factor"]
    assert onnx.numpy_helper.to_array(_attrs(second)["inferred::factor"]) == np.float32(3.0)


@pytest.mark.parametrize("opset", [15, 17, 20])
def test_layer_norms_with_different_eps_share_a_function_with_inferred_eps(opset):
    class Norms(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = torch.nn.LayerNorm(4, eps=1e-5)
            self.b = torch.nn.LayerNorm(4, eps=0.5)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.a(x) - self.b(x)

    proto = _export(Norms(), torch.randn(3, 4) * 0.1, opset=opset)
    (function,) = proto.functions
    assert (function.domain, function.name) == LAYER_NORM
    a, b = _calls(proto.graph.node, LAYER_NORM)
    assert _attrs(a)["eps"] == pytest.approx(1e-5) and _attrs(b)["eps"] == 0.5
    assert _attrs(a)["normalized_shape"] == [4] and _attrs(a)["elementwise_affine"] == 1
    assert "inferred::eps" in function.attribute
    inferred = [a.ref_attr_name for n in function.node for a in n.attribute if a.ref_attr_name]
    assert inferred == ["inferred::eps"]
    value = onnx.numpy_helper.to_array(_attrs(b)["inferred::eps"]) if opset < 17 \
        else _attrs(b)["inferred::eps"]
    assert float(value) == 0.5


def test_blocks_with_different_inner_eps_share_the_block_function():
    torch.manual_seed(0)
    proto = _export(TwoBlocks(eps2=0.25), torch.randn(2, 6), opset=20)
    functions = _functions(proto)
    first, second = _calls(proto.graph.node, _key(Block))
    assert _attrs(first)["inferred::norm.eps"] == pytest.approx(1e-5)
    assert _attrs(second)["inferred::norm.eps"] == 0.25
    inner = _calls(functions[_key(Block)].node, LAYER_NORM)[0]
    refs = {a.name: a.ref_attr_name for a in inner.attribute if a.ref_attr_name}
    assert refs == {"eps": "inferred::norm.eps", "inferred::eps": "inferred::norm.eps"}


def test_different_structures_of_one_class_get_numbered_functions():
    class Pair(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.with_bias = torch.nn.Linear(4, 4)
            self.without = torch.nn.Linear(4, 4, bias=False)
            self.again = torch.nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.again(self.without(self.with_bias(x)))

    torch.manual_seed(0)
    proto = _export(Pair(), torch.randn(2, 4))
    assert [n.op_type for n in proto.graph.node] == ["Linear", "Linear.1", "Linear"]
    functions = _functions(proto)
    assert [n.op_type for n in functions[LINEAR].node] == ["Gemm"]
    assert len(functions[(LINEAR[0], "Linear.1")].input) == 2


def test_a_module_called_twice_makes_two_calls():
    class Twice(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(self.fc(x) * 2)

    torch.manual_seed(0)
    proto = _export(Twice(), torch.randn(2, 4))
    assert [n.op_type for n in proto.graph.node] == ["Constant", "Linear", "Mul", "Linear"]
    assert len(proto.functions) == 1


def test_constants_used_across_calls_are_copied_into_each_body():
    class Shift(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + 2.0

    class Outer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = Shift(), Shift()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.b(self.a(x)) * 2.0

    proto = _export(Outer(), torch.randn(3))
    (function,) = proto.functions
    assert [n.op_type for n in function.node] == ["Constant", "Add"]
    assert len(function.input) == 1 and not function.attribute


def test_run_time_weights_reach_the_functions():
    torch.manual_seed(0)
    model = MLP()
    proto = _export(model, torch.randn(3, 8), export_params=False)
    assert [i.name for i in proto.graph.input][1:] == [
        "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert not proto.graph.initializer


def test_export_to_a_file_with_dynamic_axes(tmp_path):
    torch.manual_seed(0)
    model = Transformer(2).eval()
    target = tmp_path / "t.onnx"
    oxport.export(model, (torch.randn(2, 5, 16),), str(target), opset_version=18,
                  input_names=["x"], dynamic_axes={"x": {0: "batch", 1: "seq"}},
                  export_modules_as_functions={TransformerBlock})
    import onnxruntime as ort
    session = ort.InferenceSession(str(target), providers=["CPUExecutionProvider"])
    x = torch.randn(3, 7, 16)
    with torch.no_grad():
        expected = model(x)
    testing.compare(expected, session.run(None, {"x": x.numpy()}), rtol=RTOL, atol=ATOL)


def test_verbose_names_the_scope_of_call_nodes(capsys):
    torch.manual_seed(0)
    oxport.convert(MLP(), (torch.randn(3, 8),), verbose=True,
                   export_modules_as_functions={torch.nn.Linear})
    out = capsys.readouterr().out
    assert "= torch.nn.modules.linear::Linear[in_features=8, out_features=16](%x, %fc1.weight, " \
        "%fc1.bias), scope: MLP/Linear[fc1]" in out


# -- errors ---------------------------------------------------------------------------------
def test_opset_14_is_refused_and_nothing_is_written(tmp_path):
    target = tmp_path / "m.onnx"
    with pytest.raises(InvalidExportArgumentError, match="requires opset_version >= 15"):
        oxport.export(MLP(), (torch.randn(3, 8),), str(target), opset_version=14,
                      export_modules_as_functions=True)
    with pytest.raises(InvalidExportArgumentError, match="opset_version >= 15"):
        oxport.convert(MLP(), (torch.randn(3, 8),), opset_version=13,
                       export_modules_as_functions={torch.nn.Linear})
    assert not target.exists() and not list(tmp_path.iterdir())


@pytest.mark.parametrize("option, match", [
    ({"Linear"}, "must hold nn.Module types"),
    ({F.relu}, "must hold nn.Module types"),
    ("Linear", "True, False or a set"),
])
def test_bad_options_are_clear_errors(option, match):
    with pytest.raises(InvalidExportArgumentError, match=match):
        oxport.convert(MLP(), (torch.randn(3, 8),), export_modules_as_functions=option)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_scripted_models_are_refused():
    scripted = torch.jit.script(MLP().eval())
    with pytest.raises(InvalidExportArgumentError, match="ScriptModule"):
        oxport.convert(scripted, (torch.randn(3, 8),), export_modules_as_functions=True)


def test_an_empty_set_exports_flat_nodes():
    proto = _export(MLP(), torch.randn(3, 8), functions=set(), opset=13)
    assert not proto.functions


# -- subgraphs --------------------------------------------------------------------------------
@pytest.fixture
def relu_as_if():
    """A symbolic whose If branches read the outer ``x`` and an outer Constant."""

    def symbolic(g, x):
        one = g.graph.materialize(g.constant(torch.tensor(1.0)))
        cond = g.op("Greater", g.op("ReduceMax", x, keepdims_i=0), g.constant(-1e9))
        branches = []
        for name, scale in (("then", one), ("else", None)):
            sub = g.subgraph(name)
            out = sub.op("Relu", x)
            out = sub.op("Mul", out, scale) if scale is not None else out
            sub.graph.outputs = [out.setType(x.type())]
            branches.append(sub.graph)
        return g.op("If", cond, then_branch_g=branches[0], else_branch_g=branches[1])

    oxport.register_custom_op_symbolic("aten::relu", symbolic, 15)
    yield
    oxport.unregister_custom_op_symbolic("aten::relu", 15)


def test_subgraphs_in_a_body_read_function_inputs_and_copied_constants(relu_as_if):
    torch.manual_seed(0)
    proto = _export(TwoBlocks(), torch.randn(2, 6), functions={Block})
    (function,) = proto.functions
    # Constants come first: the Greater's bound, then the one the then-branch reads.
    assert [n.op_type for n in function.node] == [
        "Constant", "Constant", "Gemm", "LayerNormalization", "ReduceMax", "Greater", "If"]
    then = next(a.g for a in function.node[-1].attribute if a.name == "then_branch")
    defined = {*function.input, *(o for n in [*function.node, *then.node] for o in n.output)}
    assert {i for n in then.node for i in n.input} <= defined
    assert [n.op_type for n in proto.graph.node] == ["Block", "Block"]


def test_a_module_shared_by_two_parents_is_called_from_each():
    class Parent(torch.nn.Module):
        def __init__(self, act: torch.nn.Module) -> None:
            super().__init__()
            self.fc, self.act = torch.nn.Linear(4, 4), act

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.act(self.fc(x))

    class Shared(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            act = torch.nn.Tanh()
            self.a, self.b = Parent(act), Parent(act)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.b(self.a(x))

    torch.manual_seed(0)
    proto = _export(Shared(), torch.randn(2, 4))
    assert [n.op_type for n in proto.graph.node] == ["Parent", "Parent"]
    body = _functions(proto)[_key(Parent)]
    assert [n.op_type for n in body.node] == ["Linear", "Tanh"]
