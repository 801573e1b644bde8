"""The README's quick start, as written, from a fresh virtual environment.

The slow test copies the checkout (tracked and untracked, not ignored, files) to a temp
folder, creates a real venv there (no system site-packages), and runs the README's
first command in it with bash: the pinned torch from the configured wheel source, the
editable install with the test extra, then ``oxport export --example alexnet --verify``.
The venv is built once per test run and shared by the tests below.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
INSTALL_AND_EXPORT = ('pip install torch==2.13.0 && pip install -e ".[test]" && '
                      "oxport export --example alexnet --verify")
TEST_COMMAND = "python -m pytest -q"


def quick_start() -> list[str]:
    """The commands of the README's quick-start block (the first code block)."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "the quick start has no bash block"
    return [line.strip() for line in block.group(1).splitlines() if line.strip()]


def test_readme_opens_with_the_two_command_quick_start():
    headings = re.findall(r"^## (.+)$", (ROOT / "README.md").read_text(), re.M)
    assert headings[0] == "Quick start"
    assert quick_start() == [INSTALL_AND_EXPORT, TEST_COMMAND]


def test_ci_runs_the_readme_test_command():
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert any(line == TEST_COMMAND or line.startswith(TEST_COMMAND + " -p ")
               for line in lines), f".ci/run must run the README's {TEST_COMMAND!r}"
    assert "python -m pip install -q torch==2.13.0" in lines


def checkout_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                            capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: cannot tell which files a clone has")
    return [name for name in listed.stdout.split("\0") if name and (ROOT / name).is_file()]


class QuickStart:
    """A copy of the checkout, its fresh venv, and what the README's command printed."""

    def __init__(self, root: Path) -> None:
        self.checkout = root / "oxport"
        for name in checkout_files():
            target = self.checkout / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target)
        self.venv = root / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(self.venv)], check=True)
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("OXPORT_", "PYTHON")) and k != "VIRTUAL_ENV"}
        self.env["PATH"] = os.pathsep.join([str(self.venv / "bin"), self.env.get("PATH", "")])
        self.env["VIRTUAL_ENV"] = str(self.venv)
        self.result = self.bash(INSTALL_AND_EXPORT, timeout=1800)

    def bash(self, command: str, timeout: int = 600) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", command], cwd=self.checkout, env=self.env,
                              capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> QuickStart:
    return QuickStart(tmp_path_factory.mktemp("quickstart"))


@pytest.mark.slow
def test_the_first_command_exports_and_verifies_alexnet(quickstart):
    result = quickstart.result
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    out = result.stdout
    assert "Exported AlexNet (example alexnet) to alexnet.onnx" in out
    assert "opset 20" in out and "input  input: float32 1x3x224x224" in out
    match = re.search(r"Verified with ONNX Runtime at input 1x3x224x224: max abs error "
                      r"(\S+), OK", out)
    assert match, out
    assert float(match.group(1)) < 1e-4
    assert (quickstart.checkout / "alexnet.onnx").stat().st_size > 200 * 2**20


@pytest.mark.slow
def test_it_ran_in_the_fresh_venv(quickstart):
    assert quickstart.result.returncode == 0
    config = (quickstart.venv / "pyvenv.cfg").read_text()
    assert "include-system-site-packages = false" in config
    probe = quickstart.bash("python -c 'import oxport, torch, sys; "
                            "print(sys.prefix, oxport.__file__, torch.__version__)'")
    prefix, oxport_file, torch_version = probe.stdout.split()
    assert Path(prefix) == quickstart.venv
    assert Path(oxport_file).is_relative_to(quickstart.checkout)  # the editable install
    assert torch_version.startswith("2.13.0")


@pytest.mark.slow
def test_the_test_command_runs_there(quickstart):
    assert quickstart.result.returncode == 0
    result = quickstart.bash(f"{TEST_COMMAND} tests/test_quickstart.py -k readme")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "2 passed" in result.stdout
