"""The command line as a person meets it: ``--version``, a pipe that closes early, Ctrl-C,
warnings with their source line, and advice that names the command's flags."""

from __future__ import annotations

import os
import pty
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import oxport
from oxport.cli.main import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED

OXPORT = [sys.executable, "-m", "oxport"]


def env() -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("OXPORT_")},
            "OXPORT_STRICT_PLUGINS": "1"}


def test_version(tmp_path):
    result = subprocess.run([*OXPORT, "--version"], capture_output=True, text=True,
                            cwd=tmp_path, env=env(), timeout=60)
    assert (result.returncode, result.stdout) == (0, f"oxport {oxport.__version__}\n")


@pytest.mark.parametrize("args", [["ops"], ["plugins"], ["ops", "--json"]])
def test_a_pipe_closed_before_the_output(tmp_path, args):
    """Nobody reads any more: no BrokenPipeError traceback, SIGPIPE's exit status."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run([*OXPORT, *args], stdout=write_end, stderr=subprocess.PIPE,
                                text=True, cwd=tmp_path, env=env(), timeout=300)
    finally:
        os.close(write_end)
    assert (result.returncode, result.stderr) == (EXIT_BROKEN_PIPE, "")


def test_a_reader_that_stops_early(tmp_path):
    """``oxport ops --json | head -c 10``: the listing (over 100 KB) outgrows the pipe's
    64 KiB buffer, so oxport is still writing when head exits."""
    producer = subprocess.Popen([*OXPORT, "ops", "--json"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, cwd=tmp_path, env=env())
    head = subprocess.Popen(["head", "-c", "10"], stdin=producer.stdout, stdout=subprocess.PIPE)
    producer.stdout.close()  # head is the only reader
    head_output = head.communicate(timeout=300)[0]
    stderr = producer.stderr.read().decode()
    assert (producer.wait(timeout=300), stderr) == (EXIT_BROKEN_PIPE, "")
    assert head_output.startswith(b"[")


def test_ctrl_c_on_a_terminal(tmp_path):
    """SIGINT while exporting: one line, exit 130 at once, no traceback and no file."""
    (tmp_path / "slow.py").write_text(textwrap.dedent("""
        import time
        import torch

        class Slow(torch.nn.Module):
            def forward(self, x):
                print("in the model's forward", flush=True)
                time.sleep(60)
                return x + 1

        def make():
            return Slow()
    """))
    status, text, waited = _interrupted(tmp_path, ["slow:make", "--input", "2"],
                                        # the model's own line, not the progress display's
                                        # "tracing" label, which shows first
                                        b"in the model's forward")
    assert status == EXIT_INTERRUPTED, text
    # At once, not when the model's sleep ends: the display's threads leave SIGINT to the
    # main thread, whose sleep it interrupts.
    assert waited < 30, text
    assert "oxport: interrupted" in text and "Traceback" not in text
    assert not list(tmp_path.glob("*.onnx*"))


def test_ctrl_c_while_verifying_leaves_no_file(tmp_path):
    """SIGINT during --verify (the model's eager run, after the conversion): exit 130 and
    no file, since the model is written only once it is verified."""
    (tmp_path / "slow_eager.py").write_text(textwrap.dedent("""
        import time
        import torch
        import oxport

        class SlowEager(torch.nn.Module):
            def forward(self, x):
                if not oxport.is_in_onnx_export():
                    print("in the eager forward", flush=True)
                    time.sleep(60)
                return x + 1

        def make():
            return SlowEager()
    """))
    status, text, _ = _interrupted(tmp_path, ["slow_eager:make", "--input", "2", "--verify"],
                                   b"in the eager forward")
    assert status == EXIT_INTERRUPTED, text
    assert "oxport: interrupted" in text, text
    assert "Traceback" not in text
    assert not list(tmp_path.glob("*.onnx*"))


def _interrupted(folder: Path, args: list[str], marker: bytes) -> tuple[int, str, float]:
    """``oxport export ARGS`` on a terminal in ``folder``, sent SIGINT once it prints
    ``marker``: its exit status, what it printed, and the seconds it took to exit."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: oxport on a terminal
        os.chdir(folder)
        os.execvpe(sys.executable, [*OXPORT, "export", *args], env())
    output = b""
    deadline = time.monotonic() + 240
    while marker not in output and time.monotonic() < deadline:
        output += _read(fd)
    os.kill(pid, signal.SIGINT)
    sent = time.monotonic()
    while chunk := _read(fd):
        output += chunk
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), output.decode(), time.monotonic() - sent


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, 4096)
    except OSError:  # the terminal closed: the child is gone
        return b""


def test_warnings_name_the_model_line_and_advice_names_flags(tmp_path):
    (tmp_path / "shapes.py").write_text(textwrap.dedent("""
        import torch

        class Branchy(torch.nn.Module):
            def forward(self, x):
                if x.shape[0] > 2:
                    return x.relu()
                return x

        def make():
            return Branchy()
    """))
    result = subprocess.run(
        [*OXPORT, "export", "shapes:make", "--input", "3x2", "--no-plugin",
         "oxport.activations", "--dynamic-axis", "x:0"], capture_output=True, text=True,
        cwd=tmp_path, env=env(), timeout=300)
    assert result.returncode == 1
    assert "shapes.py:6: TracerWarning: Converting a tensor to a Python boolean" \
        in result.stderr
    # Not the Python API's words.
    assert "aten::relu" in result.stderr and "disable_plugins=" not in result.stderr
    assert "provided by oxport.activations, which is not loaded: --no-plugin or " \
        "OXPORT_DISABLE_PLUGINS blocks it" in result.stderr
    assert "--fallback aten-fallback" in result.stderr
    named = subprocess.run(
        [*OXPORT, "export", "shapes:make", "--input", "3x2", "--dynamic-axis", "image:0"],
        capture_output=True, text=True, cwd=tmp_path, env=env(), timeout=300)
    assert named.returncode == 2
    assert "--dynamic-axis names 'image'" in named.stderr
    assert "name them with --input-names and --output-names first" in named.stderr


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["plugins"], ["plugins", "--json"]])
def test_help_and_listing_plugins_do_not_import_torch(tmp_path, args):
    """What keeps them fast (benchmarks/cli_startup.py times them against their bars)."""
    code = ("import sys\nfrom oxport.cli import main\ntry:\n    main(%r)\nexcept SystemExit:\n"
            "    pass\nprint(sorted(m for m in ('torch', 'onnx', 'numpy') if m in sys.modules))"
            % (args,))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=tmp_path, env=env(), timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "[]"


def test_the_layout_trap_is_gone(tmp_path):
    """From the folder above a clone named ``oxport``, Python finds the clone folder before
    the installed package: its root ``__init__.py`` loads the package from ``core/`` in its
    place, so ``import oxport``, an export and ``python -m oxport`` work there too."""
    root = Path(__file__).resolve().parent.parent
    clone = tmp_path / "oxport"
    clone.mkdir()
    for folder in ("core", "opsets", "plugins"):
        shutil.copytree(root / folder, clone / folder)
    shutil.copy(root / "__init__.py", clone / "__init__.py")
    code = ("import io, torch, oxport\n"
            "oxport.export(torch.nn.Linear(2, 3), (torch.randn(1, 2),), io.BytesIO())\n"
            "print(oxport.__file__, oxport.opsets.nn.__file__)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=tmp_path, env=env(), timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(clone / "core" / "__init__.py"),
                                     str(clone / "opsets" / "nn.py")]
    cli = subprocess.run([*OXPORT, "--version"], capture_output=True, text=True,
                         cwd=tmp_path, env=env(), timeout=60)
    assert cli.stdout == f"oxport {oxport.__version__}\n", cli.stderr


def test_an_uninstalled_clone_says_to_install_it(tmp_path):
    """Without the installed distribution (``-S``: no site-packages) the clone cannot find its
    op packs: importing it says so and gives the install command."""
    root = Path(__file__).resolve().parent.parent
    clone = tmp_path / "oxport"
    clone.mkdir()
    shutil.copy(root / "__init__.py", clone / "__init__.py")
    result = subprocess.run([sys.executable, "-S", "-c", "import oxport"], capture_output=True,
                            text=True, cwd=tmp_path, env=env(), timeout=60)
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == (
        f"ImportError: `import oxport` found the folder {clone}, a clone of oxport's repository "
        "that is not installed: its op packs are found through the installed entry points. "
        f"Install it first: pip install torch==2.13.0 && pip install -e {clone}")


def test_ctrl_c_that_a_library_swallows_still_stops_the_export(tmp_path):
    """A KeyboardInterrupt caught and dropped inside the model's trace (as a C++ callback
    that ignores Python errors would) still ends the command: exit 130, no file."""
    (tmp_path / "swallow.py").write_text(textwrap.dedent("""
        import os
        import signal
        import torch

        class Swallowing(torch.nn.Module):
            def forward(self, x):
                try:
                    os.kill(os.getpid(), signal.SIGINT)
                    for _ in range(1000):  # the handler runs at a bytecode boundary
                        pass
                except KeyboardInterrupt:
                    pass
                return x + 1

        def make():
            return Swallowing()
    """))
    result = subprocess.run([*OXPORT, "export", "swallow:make", "--input", "2"],
                            capture_output=True, text=True, cwd=tmp_path, env=env(),
                            timeout=300)
    assert result.returncode == EXIT_INTERRUPTED, result.stderr
    assert "oxport: interrupted" in result.stderr and "Traceback" not in result.stderr
    assert not list(tmp_path.glob("*.onnx*"))
