"""With no op pack loaded, an export fails with one error that lists every op."""

import pytest
import torch

import oxport


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 4)

    def forward(self, x):
        return torch.relu(self.linear(x)).sum(1)


def test_no_packs_lists_every_op(tmp_path):
    target = tmp_path / "small.onnx"
    with pytest.raises(oxport.UnsupportedOperatorError) as failure:
        oxport.export(Small(), (torch.randn(2, 3),), str(target), autoload_plugins=False)
    message = str(failure.value)
    for op in ("aten::linear", "aten::relu", "aten::sum"):
        assert op in message
    assert {info.kind for info in failure.value.ops} >= {"aten::linear", "aten::relu", "aten::sum"}
    # The built-in packs are installed: the error names the one to enable, not "install".
    assert "aten::relu (1 use, first at " in message
    assert "): provided by oxport.activations, which is not loaded: plugin autoload is off " \
        "(autoload_plugins=False, OXPORT_DISABLE_PLUGIN_AUTOLOAD)" in message
    assert "install an op pack" not in message
    assert list(tmp_path.iterdir()) == []


def test_the_environment_switch_disables_autoload(monkeypatch):
    monkeypatch.setenv("OXPORT_DISABLE_PLUGIN_AUTOLOAD", "1")
    with pytest.raises(oxport.UnsupportedOperatorError, match="aten::relu"):
        oxport.convert(Small(), (torch.randn(2, 3),))
