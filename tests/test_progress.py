"""Export progress: per-phase INFO log lines, listeners (nodes and bytes), the terminal
display (delayed, and silent when not a terminal)."""

from __future__ import annotations

import io
import logging

import torch
from rich.console import Console

import oxport
from oxport.exporter import progress


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple] = []

    def phase_started(self, name: str) -> None:
        self.events.append(("start", name))

    def phase_advanced(self, name: str, done: int, total: int) -> None:
        self.events.append(("advance", name, done, total))

    def phase_finished(self, name: str, seconds: float) -> None:
        self.events.append(("finish", name))


def stack(depth: int = 4) -> torch.nn.Module:
    return torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(depth)])


def test_listener_sees_every_phase_nodes_and_bytes(tmp_path):
    recorder = Recorder()
    with progress.listening(recorder):
        result = oxport.export(stack(), (torch.randn(2, 16),), tmp_path / "m.onnx")
    started = [e[1] for e in recorder.events if e[0] == "start"]
    assert started == ["plugins", "trace", "convert", "passes", "serialize", "write", "check"]
    assert started == [e[1] for e in recorder.events if e[0] == "finish"]
    nodes = [e[2:] for e in recorder.events if e[:2] == ("advance", "convert")]
    assert nodes == [(i, 4) for i in range(1, 5)]
    written = [e[2:] for e in recorder.events if e[:2] == ("advance", "write")]
    assert len(written) == 8 and written[-1] == (result.serialized.weight_bytes,) * 2
    assert all(a[0] < b[0] for a, b in zip(written, written[1:]))
    assert set(started) <= set(result.timings)


def test_external_data_reports_bytes_too(tmp_path):
    recorder = Recorder()
    with progress.listening(recorder):
        oxport.export(stack(2), (torch.randn(2, 16),), tmp_path / "m.onnx", external_data=True)
    written = [e[2:] for e in recorder.events if e[:2] == ("advance", "write")]
    assert written[-1] == (2 * (16 * 16 + 16) * 4,) * 2


def test_listeners_end_with_the_block(tmp_path):
    recorder = Recorder()
    with progress.listening(recorder):
        pass
    oxport.export(stack(1), (torch.randn(2, 16),), tmp_path / "m.onnx")
    assert recorder.events == []


def test_phases_are_logged_with_timings(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="oxport"):
        oxport.export(stack(3), (torch.randn(2, 16),), tmp_path / "m.onnx")
    messages = [r.getMessage() for r in caplog.records if r.name == "oxport"]
    for label in ("tracing: ", "converting nodes: ", "writing weights: ", "checking the model: "):
        assert any(m.startswith(label) and " s" in m for m in messages), (label, messages)
    assert any(m.startswith("converting nodes: ") and m.endswith("(3 nodes)") for m in messages)
    assert any(m.startswith("writing weights: ") and m.endswith("(3.2 KiB)") for m in messages)


def test_failed_phase_is_not_logged_as_done(caplog):
    with caplog.at_level(logging.INFO, logger="oxport"):
        try:
            with progress.phase("trace"):
                raise ValueError("boom")
        except ValueError:
            pass
    assert not [r for r in caplog.records if r.getMessage().startswith("tracing:")]


def test_amounts_and_sizes():
    assert progress.amount("convert", 3, 10) == "3/10 nodes"
    assert progress.amount("convert", 10, 10) == "10 nodes"
    assert progress.amount("write", 2**20, 3 * 2**20) == "1.0 MiB/3.0 MiB"
    assert progress.size(812) == "812 B" and progress.size(5 * 2**30) == "5.0 GiB"


def terminal(buffer: io.StringIO, is_terminal: bool) -> Console:
    return Console(file=buffer, force_terminal=is_terminal, width=100, color_system=None)


def test_display_shows_the_phases_on_a_terminal(tmp_path):
    buffer = io.StringIO()
    with progress.display(delay=0, console=terminal(buffer, True)):
        oxport.export(stack(), (torch.randn(2, 16),), tmp_path / "m.onnx")
    text = buffer.getvalue()
    for label in ("tracing", "converting nodes", "writing weights", "checking the model"):
        assert label in text
    assert "4 nodes" in text and "4.2 KiB" in text


def test_display_waits_for_the_delay(tmp_path):
    buffer = io.StringIO()
    with progress.display(delay=60, console=terminal(buffer, True)) as shown:
        oxport.export(stack(1), (torch.randn(2, 16),), tmp_path / "m.onnx")
    assert shown is not None and buffer.getvalue() == ""


def test_display_is_silent_when_not_a_terminal(tmp_path):
    buffer = io.StringIO()
    with progress.display(delay=0, console=terminal(buffer, False)) as shown:
        oxport.export(stack(1), (torch.randn(2, 16),), tmp_path / "m.onnx")
    assert shown is None and buffer.getvalue() == ""
