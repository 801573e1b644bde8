"""Every code block of README.md and docs/*.md runs, and docs/plugin_api.md is up to date.

For each Markdown file, its blocks run in order in one empty temp folder, in one
subprocess (so a block may use what an earlier one defined or wrote):

* ``python`` blocks run in a shared namespace; a block whose first line is
  ``# file: PATH`` is written to PATH instead (later blocks import it, commands use it);
* ``bash``/``sh``/``shell`` blocks: each command starting with ``oxport`` or ``python``
  runs (and must exit 0). ``pip install`` of a local folder and ``pip uninstall`` run
  too, into a throwaway virtual environment layered over this one (``--no-deps
  --no-build-isolation``, nothing from a registry); other ``pip`` lines (the quick
  start's install line, which tests/test_quickstart.py covers) are skipped;
* ``toml`` blocks must parse (and ``# file:`` ones are written);
* ``text`` blocks and blocks without a language are output listings, not run.

A block preceded by ``<!-- skip-test: why -->`` does not run.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import re
import site
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
SKIP = re.compile(r"^<!--\s*skip-test\b")
FENCE = re.compile(r"^```\s*([\w+-]*)\s*$")
RUN_LANGUAGES = {"python": "python", "py": "python", "bash": "shell", "sh": "shell",
                 "shell": "shell", "console": "shell", "toml": "toml"}


@dataclasses.dataclass
class Block:
    kind: str  # python, shell, toml
    code: str
    line: int
    skip: bool


def code_blocks(path: Path) -> list[Block]:
    """The runnable blocks of a Markdown file (``text`` and unlabelled ones left out)."""
    blocks: list[Block] = []
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        start, language = i, match.group(1).lower()
        i += 1
        body = []
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        i += 1
        previous = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        if language in RUN_LANGUAGES:
            blocks.append(Block(RUN_LANGUAGES[language], "\n".join(body) + "\n", start + 1,
                                bool(SKIP.match(previous.strip()))))
    return blocks


RUNNER = r'''
import importlib, json, os, shlex, site, subprocess, sys, sysconfig, tomllib, traceback
from pathlib import Path

source, blocks_file, python = sys.argv[1], sys.argv[2], sys.argv[3]
blocks = json.loads(Path(blocks_file).read_text())
sys.path.insert(0, os.getcwd())
namespace = {"__name__": "__main__"}


def fail(block, what):
    print(f"\n{source}:{block['line']}: this {block['kind']} block failed:\n{block['code']}"
          f"\n{what}", file=sys.stderr)
    sys.exit(1)


def write(block, code):
    first, _, rest = code.partition("\n")
    if first.startswith("# file:"):
        path = Path(first.split(":", 1)[1].strip())
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(rest)
        return True
    return False


def commands(code):
    joined = code.replace("\\\n", " ")
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            yield line


def pip(words):
    """pip install of local folders and pip uninstall, into the layered venv."""
    if words[1] == "uninstall":
        return [python, "-m", "pip", "uninstall", "-q", *words[2:]]
    targets = [w for w in words[2:] if not w.startswith("-")]
    if words[1] == "install" and targets and all(
            w.lstrip("\"'").startswith(("./", "/", ".")) for w in targets):
        return [python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                *words[2:]]
    return None


for block in blocks:
    if block["skip"]:
        continue
    code = block["code"]
    if block["kind"] == "python":
        if write(block, code):
            continue
        # A real file, so that inspect (and torch.jit.script) can read the source.
        script = Path(blocks_file).parent / f"{Path(source).stem}_line{block['line']}.py"
        script.write_text(code)
        try:
            exec(compile(code, str(script), "exec"), namespace)
        except BaseException:
            fail(block, traceback.format_exc())
    elif block["kind"] == "toml":
        try:
            tomllib.loads(code)
        except tomllib.TOMLDecodeError as exc:
            fail(block, f"invalid TOML: {exc}")
        write(block, code)
    else:
        for command in commands(code):
            words = shlex.split(command)
            if words[0] == "pip":
                argv = pip(words)
                if argv is None:
                    continue
                result = subprocess.run(argv, capture_output=True, text=True, timeout=600)
                # Later python blocks see the install, as a new interpreter would.
                site.addsitedir(sysconfig.get_path("purelib"))
                importlib.invalidate_caches()
            elif words[0] in ("oxport", "python"):
                result = subprocess.run(["bash", "-c", command], capture_output=True,
                                        text=True, timeout=600)
            else:
                fail(block, f"{command!r}: only oxport, python and pip commands run in the "
                            "docs' tests; mark the block <!-- skip-test: why --> otherwise")
            if result.returncode != 0:
                fail(block, f"{command!r} exited {result.returncode}:\n{result.stdout}\n"
                            f"{result.stderr}")
print("ran", sum(not b["skip"] for b in blocks), "blocks")
'''


def layered_venv(root: Path) -> Path:
    """A venv without pip that sees this interpreter's site-packages; installs go into it.
    Its bin holds an ``oxport`` command running its own python."""
    venv.create(root, with_pip=False, symlinks=os.name != "nt")
    python = root / "bin" / "python"
    purelib = Path(subprocess.check_output(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        text=True).strip())
    parents = [p for p in [*site.getsitepackages(), site.getusersitepackages(), *sys.path]
               if p and Path(p).is_dir() and "site-packages" in p]
    (purelib / "_oxport_docs_parent.pth").write_text(
        "".join(f"import site; site.addsitedir({p!r})\n" for p in dict.fromkeys(parents)))
    shim = root / "bin" / "oxport"
    shim.write_text(f"#!{python}\nimport sys\nfrom oxport.cli import main\n"
                    "sys.exit(main())\n")
    shim.chmod(0o755)
    return python


RUNNABLE = [doc for doc in DOCS if any(not block.skip for block in code_blocks(doc))]


@pytest.mark.parametrize("doc", RUNNABLE, ids=[str(d.relative_to(ROOT)) for d in RUNNABLE])
def test_code_blocks_run(doc, tmp_path):
    blocks = code_blocks(doc)
    python = layered_venv(tmp_path / "venv")
    work = tmp_path / "work"
    work.mkdir()
    blocks_file = tmp_path / "blocks.json"
    blocks_file.write_text(json.dumps([dataclasses.asdict(b) for b in blocks]))
    runner = tmp_path / "runner.py"
    runner.write_text(RUNNER)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OXPORT_")}
    environ["OXPORT_STRICT_PLUGINS"] = "1"
    environ["PATH"] = os.pathsep.join([str(python.parent), os.path.dirname(sys.executable),
                                       environ.get("PATH", "")])
    environ.pop("PYTHONPATH", None)
    result = subprocess.run([str(python), str(runner), str(doc.relative_to(ROOT)),
                             str(blocks_file), str(python)], cwd=work, env=environ,
                            capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]


def test_skipped_blocks_say_why():
    for doc in DOCS:
        for line in doc.read_text().splitlines():
            if SKIP.match(line.strip()):
                assert re.match(r"^<!--\s*skip-test:\s*\S.*-->$", line.strip()), (
                    f"{doc.name}: {line!r} must say why: <!-- skip-test: reason -->")


#: Pages another generator writes (docs/supported_ops.md, from the registry).
GENERATED = {ROOT / "docs" / "supported_ops.md"}


def test_relative_links_point_at_files():
    missing = set()
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text()):
            path = (doc.parent / target).resolve()
            if "://" not in target and not path.exists():
                missing.add((doc.name, path))
    assert {path for _, path in missing} <= GENERATED, f"links to missing files: {missing}"
    if missing:
        pytest.skip(f"not generated yet: {sorted(str(p) for _, p in missing)}")


def test_plugin_api_reference_is_up_to_date():
    spec = importlib.util.spec_from_file_location("gen_plugin_api",
                                                  ROOT / "docs" / "gen_plugin_api.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (ROOT / "docs" / "plugin_api.md").read_text() == module.render(), (
        "docs/plugin_api.md is out of date: run python docs/gen_plugin_api.py")
    assert "### oxport_register_symbolics" in module.render()


def test_code_block_parser(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("text\n```python\nprint(1)\n```\n<!-- skip-test: slow -->\n\n```bash\n"
                   "oxport ops\n```\n```text\nout\n```\n```toml\na = 1\n```\n")
    assert [(b.kind, b.code, b.line, b.skip) for b in code_blocks(doc)] == [
        ("python", "print(1)\n", 2, False), ("shell", "oxport ops\n", 7, True),
        ("toml", "a = 1\n", 13, False)]
