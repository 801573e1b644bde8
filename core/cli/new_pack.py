"""``oxport new-pack NAME``: a pip-installable op pack that passes its own tests straight
after ``pip install -e NAME``: a pyproject with the entry point, one PyTorch op and its
symbolic, the symbolic's test case, and the one-line test running it."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
from typing import Any

from oxport.cli.common import EXIT_OK, EXIT_USAGE

_NAME = re.compile(r"[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*")

#: path (with ``{module}``) -> text; ``{name}``, ``{module}`` are filled in.
TEMPLATE = {
    "pyproject.toml": '''\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "oxport-{name}"
version = "0.1.0"
description = "An oxport op pack: ONNX export for {module}::double"
readme = "README.md"
requires-python = ">=3.10"
dependencies = ["oxport", "torch"]

[project.optional-dependencies]
test = ["pytest>=7", "onnxruntime>=1.17"]

# The line that plugs the pack into oxport: `oxport plugins` lists it as {name}, and
# OXPORT_DISABLE_PLUGINS={name} blocks it.
[project.entry-points.oxport]
{name} = "{module}.pack:pack"

[tool.setuptools]
packages = ["{module}"]

[tool.pytest.ini_options]
testpaths = ["tests"]
''',
    "README.md": '''\
# oxport-{name}

An oxport op pack. It exports the PyTorch op `{module}::double`
(defined in `{module}/ops.py`) to ONNX with the symbolic in `{module}/pack.py`, tested by
the case in `{module}/cases.py`.

```bash
pip install -e ".[test]"
oxport plugins --check   # lists {name} and what it registers
python -m pytest -q      # every case, at each opset the symbolic serves, in ONNX Runtime
```

Each case runs through both of oxport's front ends: traced (`oxport.export(model, ...)`)
and captured with torch.export (`oxport.export(model, ..., dynamo=True)`), so the op needs
a fake kernel (`register_fake`, in `ops.py`) for torch.export to capture it. A case
torch.export cannot capture declares why with `not_exportable="..."` and runs traced
only; `OXPORT_TEST_FRONT_ENDS=trace` runs every case traced only.

Replace the op with yours: one `@pack.symbolic` per op (and per opset where ONNX changed,
with `since=`), one `pack.case` or more for each.
''',
    "{module}/__init__.py": '''\
"""The oxport op pack {name}: the PyTorch op it exports, ``{module}::double``."""

from {module}.ops import double

__all__ = ["double"]
''',
    "{module}/ops.py": '''\
"""The PyTorch op the pack exports (replace it with yours)."""

import torch


@torch.library.custom_op("{module}::double", mutates_args=())
def double(x: torch.Tensor) -> torch.Tensor:
    """Twice ``x``."""
    return x * 2


@double.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    """The output's shape and dtype without computing it: torch.export needs it."""
    return torch.empty_like(x)
''',
    "{module}/pack.py": '''\
"""How ``{module}::double`` becomes ONNX. oxport loads ``pack`` through the entry point in
pyproject.toml; the test cases live in their own module, which exports never import."""

import oxport

pack = oxport.OpPack("{name}", cases="{module}.cases")


@pack.symbolic("{module}::double", since=7)
def double(g, x):
    """``x + x``: one ai.onnx Add, the same at every opset from 7."""
    return g.op("Add", x, x)
''',
    "{module}/cases.py": '''\
"""The test cases of the pack's symbolics: oxport's runner exports each at the lowest, the
default and the highest opset its symbolic serves, traced, and at the lowest and highest
through torch.export, and compares ONNX Runtime with PyTorch. A case torch.export cannot
capture says why: ``pack.case(..., not_exportable="why")``."""

import torch

from {module}.ops import double
from {module}.pack import pack


class Double(torch.nn.Module):
    def forward(self, x):
        return double(x)


pack.case("{module}::double", Double, (2, 3))
''',
    "tests/test_{module}.py": '''\
from oxport.testing import op_tests

test_{module} = op_tests("{name}")
''',
}


def add_new_pack_command(sub: Any, help: str) -> None:
    """Add ``oxport new-pack`` to the subcommand parsers."""
    p = sub.add_parser(
        "new-pack", help=help,
        description="Create the folder NAME holding a pip-installable op pack: pyproject.toml "
                    "with the oxport entry point NAME, the package oxport_NAME with one "
                    "PyTorch op, its symbolic and its test case, and tests/ with the "
                    "one-line test. `pip install -e NAME && pytest NAME` passes as it is.")
    p.add_argument("name", metavar="NAME",
                   help="the pack's name: lowercase letters, digits, '-' or '_', e.g. my-ops")
    p.add_argument("-d", "--directory", metavar="DIR", default=".",
                   help="where to create the folder NAME (default: here)")
    p.set_defaults(run=run_new_pack)


def run_new_pack(args: argparse.Namespace) -> int:
    """``oxport new-pack``; returns the exit status."""
    name = args.name
    if not _NAME.fullmatch(name):
        return _usage(f"{name!r} is not a pack name: use lowercase letters and digits, words "
                      "joined by '-' or '_', starting with a letter (e.g. my-ops).")
    target = os.path.normpath(os.path.join(args.directory, name))
    if os.path.lexists(target):
        return _usage(f"{target!r} already exists: pick another NAME, or another place with "
                      "--directory.")
    if not os.path.isdir(args.directory):
        return _usage(f"--directory {args.directory!r} is not a folder.")
    module = "oxport_" + name.replace("-", "_")
    # Written in a scratch folder beside the target, then renamed: never a half-made pack.
    scratch = tempfile.mkdtemp(prefix=f".{name}-", dir=args.directory)
    try:
        for path, text in TEMPLATE.items():
            full = os.path.join(scratch, path.format(module=module))
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w", encoding="utf-8") as f:
                f.write(text.format(name=name, module=module))
        os.rename(scratch, target)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    print(f"Created the op pack {name} in {target}/ (package {module}, entry point {name}).\n"
          f"Next: pip install -e {target} && python -m pytest {target}")
    return EXIT_OK


def _usage(message: str) -> int:
    print(f"oxport new-pack: error: {message}", file=sys.stderr)
    return EXIT_USAGE
