"""What a person sees of an export in Python: ``repr(result)``, ``result.warnings`` and the
log ``verbose=True`` prints."""

from __future__ import annotations

import io
import logging

import torch

import oxport


class Branchy(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.norm = torch.nn.BatchNorm2d(4)

    def forward(self, x):
        if x.shape[0] > 0:  # a TracerWarning at this line
            x = x + 1
        return self.norm(self.conv(x))


BRANCH_LINE = Branchy.forward.__code__.co_firstlineno + 1


def export(**kwargs) -> oxport.ExportResult:
    return oxport.export(Branchy().eval(), (torch.randn(1, 3, 8, 8),), io.BytesIO(),
                         input_names=["image"], output_names=["scores"], **kwargs)


def test_repr_is_one_line_without_weights():
    result = export()
    assert repr(result) == ("<ExportResult opset 20: 2 nodes, inputs image, outputs scores, "
                            "3 weights (452 B), 1 warning>")


def test_warnings_are_readable():
    (warning,) = export().warnings
    assert warning.category is torch.jit.TracerWarning
    assert (warning.filename, warning.lineno) == (__file__, BRANCH_LINE)
    assert str(warning).startswith(f"{__file__}:{BRANCH_LINE}: TracerWarning: Converting a "
                                   "tensor to a Python boolean")
    assert warning == oxport.ExportWarning(warning.category, warning.message, __file__,
                                           BRANCH_LINE)


def test_verbose_logs_readable_lines(capsys):
    logger = logging.getLogger("oxport")
    export(verbose=True)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("oxport: ")]
    assert "oxport: optimize: batch norms fused into convolutions: 1; constants made " \
        "initializers: 1" in lines
    assert "{" not in "".join(lines)
    assert any(line.startswith("oxport: exported 2 nodes at opset 20 in ") for line in lines)
    assert not logger.handlers  # verbose=True leaves the log as it found it
