"""Throwaway virtual environments layered over the running interpreter's packages."""

from __future__ import annotations

import os
import site
import subprocess
import venv
from pathlib import Path


def layered_venv(root: Path) -> tuple[Path, Path]:
    """A venv that also sees this interpreter's site-packages (oxport, torch, pip, setuptools).

    Installing there keeps the running environment, which other test runs may share,
    untouched; the caller adds the returned site-packages folder to sys.path.
    Returns (python executable, site-packages folder).
    """
    venv.create(root, with_pip=False, symlinks=os.name != "nt")
    python = root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    purelib = Path(subprocess.check_output(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        text=True).strip())
    parents = [p for p in [*site.getsitepackages(), site.getusersitepackages()]
               if Path(p).is_dir()]
    (purelib / "_oxport_test_parent.pth").write_text(
        "".join(f"import site; site.addsitedir({p!r})\n" for p in parents))
    return python, purelib
