"""CI's gate on PyTorch's own exporter tests (.ci/conformance_gate.py): the floors, the
reasons and the generated docs section, on made-up results."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.fixture
def gate(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("conformance_gate",
                                                  ROOT / ".ci" / "conformance_gate.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "conformance_gate", module)  # (its dataclass needs it)
    spec.loader.exec_module(module)
    floor = tmp_path / "floor.json"
    floor.write_text(json.dumps({"full": {"17": {"trace": 2}},
                                 "sample": {"mode": "trace", "floor": {"9": 1}}}))
    monkeypatch.setattr(module, "FLOOR_FILE", floor)
    return module


def _results(folder: pathlib.Path, name: str, passed: list[str], failed: dict[str, str]):
    tests = {f"Cls::{t}": {"outcome": "passed"} for t in passed}
    tests.update({f"Cls::{t}": {"outcome": "failed", "message": m} for t, m in failed.items()})
    (folder / f"oxport-{name}.json").write_text(json.dumps({
        "wall_cap_hit": False, "tests": tests,
        "baseline_relative": {"passed": len(passed), "denominator": len(tests),
                              "not_passed": sorted(f"Cls::{t}" for t in failed)}}))


def test_the_gate_fails_below_a_floor_and_names_the_run(gate, tmp_path):
    _results(tmp_path, "full-opset17-trace", ["test_a"], {"test_b": "AssertionError: x"})
    _results(tmp_path, "sample-opset9-trace", ["test_a"], {})
    runs = gate.planned_runs(gate.load_floors())
    assert [r.name for r in runs] == ["full-opset17-trace", "sample-opset9-trace"]
    assert gate.check(gate.load_floors(), runs, tmp_path) == [
        "full-opset17-trace: 1/2 (floor 2)"]


def test_a_run_without_results_stops_the_gate_clearly(gate, tmp_path):
    with pytest.raises(SystemExit, match="missing: run with --run first"):
        gate.score(gate.Run(17, "trace"), tmp_path)
    with pytest.raises(SystemExit, match="no corpus at"):
        gate.corpus_dir(str(tmp_path))


def test_the_docs_section_lists_each_failure_with_its_reason(gate, tmp_path, monkeypatch):
    _results(tmp_path, "full-opset17-trace", ["test_a"],
             {"test_quantized_x": "CheckerError", "test_new": "ValueError: boom\nmore"})
    _results(tmp_path, "sample-opset9-trace", ["test_a"], {"test_quantized_x": "CheckerError"})
    section = gate.docs_section(gate.planned_runs(gate.load_floors()), tmp_path,
                                {"test_quantized_*": "Quantized: open."})
    assert "| full-opset17-trace | 1 | 3 | 2 |" in section
    assert "- Quantized: open. Tests (1): `test_quantized_x` (trace 17, 9 (sample))." in section
    assert "(no reason recorded) `ValueError: boom` Tests (1): `test_new` (trace 17)" in section
    docs = tmp_path / "differences.md"
    docs.write_text("# Title\n\n## Before\n\ntext\n\n## After\n\nmore\n")
    monkeypatch.setattr(gate, "DOCS", docs)
    gate.write_docs(section)
    gate.write_docs(section)  # rewritten in place, not added twice
    text = docs.read_text()
    assert text.count(gate.SECTION) == 1 and text.endswith(section)
    assert text.startswith("# Title\n\n## Before\n\ntext\n\n## After\n\nmore\n\n")
