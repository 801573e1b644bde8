"""The export path's plumbing: written files' permissions, lazily computed weights, the
garbage collector paused only while exporting, free heap pages returned after the trace, and the numbers the benchmark checks
(file size equal to the unique weights, one external-data file)."""

from __future__ import annotations

import gc
import os
import platform
import weakref
from collections.abc import Callable

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from torch import nn

import oxport
from oxport import serialize
from oxport.errors import InvalidExportArgumentError
from oxport.exporter import progress
from oxport.frontends.torchscript import trace


def test_lazy_weights_are_computed_when_written_and_in_model_protos():
    calls = []

    def rows(start: int, stop: int, out: torch.Tensor) -> None:
        calls.append((start, stop))
        out.copy_(torch.arange(6.0).reshape(2, 3)[start:stop])

    lazy = serialize.LazyTensor((2, 3), torch.float32, rows)
    weight = serialize.Weight("w", lazy)
    assert weight.nbytes == 24 and calls == []
    header = serialize.tensor_header("w", lazy)
    assert list(header.dims) == [2, 3] and header.data_type == onnx.TensorProto.FLOAT
    proto = serialize.tensor_proto("w", lazy)
    np.testing.assert_array_equal(onnx.numpy_helper.to_array(proto),
                                  np.arange(6.0, dtype=np.float32).reshape(2, 3))
    assert calls == [(0, 2)]


def test_computed_weights_are_written_rows_at_a_time(monkeypatch):
    monkeypatch.setattr(serialize.weights, "CHUNK_BYTES", 24)  # two rows of 3 float32
    calls = []
    full = torch.arange(15.0).reshape(5, 3)

    def rows(start: int, stop: int, out: torch.Tensor) -> None:
        calls.append((start, stop, out.data_ptr()))
        torch.mul(full[start:stop], 2, out=out)

    lazy = serialize.LazyTensor(full.shape, torch.float32, rows)
    model = onnx.helper.make_model(onnx.helper.make_graph([], "g", [], []))
    data = serialize.to_bytes(serialize.Serialized(model, [serialize.Weight("w", lazy)], {}))
    (loaded,) = onnx.load_from_string(data).graph.initializer
    np.testing.assert_array_equal(onnx.numpy_helper.to_array(loaded), (full * 2).numpy())
    assert [call[:2] for call in calls] == [(0, 2), (2, 4), (4, 5)]
    assert len({call[2] for call in calls}) == 1  # every chunk computed into one buffer


def test_every_computed_weight_is_computed_into_one_buffer_sized_once():
    pointers = []

    def rows_of(full: torch.Tensor):
        def rows(start: int, stop: int, out: torch.Tensor) -> None:
            pointers.append(out.data_ptr())
            out.copy_(full[start:stop])
        return rows

    small, large = torch.ones(2, 3), torch.arange(40.0).reshape(10, 4)
    weights = [serialize.Weight(name, serialize.LazyTensor(full.shape, torch.float32,
                                                           rows_of(full)))
               for name, full in (("small", small), ("large", large))]
    model = onnx.helper.make_model(onnx.helper.make_graph([], "g", [], []))
    data = serialize.to_bytes(serialize.Serialized(model, weights, {}))
    loaded = {t.name: onnx.numpy_helper.to_array(t)
              for t in onnx.load_from_string(data).graph.initializer}
    np.testing.assert_array_equal(loaded["large"], large.numpy())
    np.testing.assert_array_equal(loaded["small"], small.numpy())
    assert len(set(pointers)) == 1  # the smaller weight, written first, did not size it


class _Phases:
    """A progress listener that calls ``started(name)`` as each phase starts."""

    def __init__(self, started: Callable[[str], None]) -> None:
        self.phase_started = started

    def phase_advanced(self, name: str, done: int, total: int) -> None:
        pass

    def phase_finished(self, name: str, seconds: float) -> None:
        pass


def _phases_and_releases(monkeypatch, model: nn.Module, interval: float) -> list[str]:
    events: list[str] = []
    monkeypatch.setattr(trace, "release_free_memory", lambda: events.append("release"))
    monkeypatch.setattr(trace, "RELEASE_INTERVAL_S", interval)
    with progress.listening(_Phases(events.append)):
        oxport.convert(model, (torch.randn(1, 3),))
    return events


def test_free_heap_pages_go_back_to_the_system_right_after_the_trace(monkeypatch):
    events = _phases_and_releases(monkeypatch, nn.Linear(3, 2), interval=1e9)
    assert events[events.index("trace") + 1:][:2] == ["release", "convert"]


def test_free_heap_pages_go_back_between_submodule_calls_while_tracing(monkeypatch):
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 2))
    events = _phases_and_releases(monkeypatch, model, interval=0.0)
    during = events[events.index("trace") + 1:events.index("convert")]
    # One per submodule call at least (the Sequential and its three children), then the end.
    assert set(during) == {"release"} and len(during) >= 5


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_glibc_malloc_trim_is_found():
    assert trace._malloc_trim() is not None
    trace.release_free_memory()


def test_the_garbage_collector_is_paused_only_during_the_export():
    seen = []

    class Probe(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            seen.append(gc.isenabled())
            return x + 1

    assert gc.isenabled()
    oxport.convert(Probe(), (torch.randn(2),))
    assert seen == [False] and gc.isenabled()

    class Broken(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise ValueError("no")

    with pytest.raises(oxport.OnnxExporterError):
        oxport.convert(Broken(), (torch.randn(2),))
    assert gc.isenabled()
    gc.disable()
    try:
        oxport.convert(Probe(), (torch.randn(2),))
        assert not gc.isenabled()  # left as the caller had it
    finally:
        gc.enable()


def test_torch_export_garbage_is_collected_after_the_capture():
    """torch.export's capture leaves cyclic garbage (2 MB on ResNet-50) that the paused
    collector would keep until the export ends: it is collected during and after the
    capture, unless the caller has the collector off."""
    collected_by_convert: list[bool] = []
    garbage: list[weakref.ref] = []

    class Cycle:
        def __init__(self) -> None:
            self.me = self

    class Probe(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            garbage.append(weakref.ref(Cycle()))
            return x + 1

    def started(name: str) -> None:
        if name == "convert":
            collected_by_convert.append(all(ref() is None for ref in garbage))

    with progress.listening(_Phases(started)):
        oxport.convert(Probe(), (torch.randn(2),), dynamo=True)
        assert garbage and collected_by_convert == [True] and gc.isenabled()
        assert gc.get_freeze_count() == 0  # the objects frozen meanwhile are back
        gc.freeze()  # a caller's own frozen objects stay frozen
        try:
            oxport.convert(Probe(), (torch.randn(2),), dynamo=True)
            assert collected_by_convert == [True, True] and gc.get_freeze_count() > 0
        finally:
            gc.unfreeze()
        gc.disable()
        try:
            oxport.convert(Probe(), (torch.randn(2),), dynamo=True)
            assert collected_by_convert == [True, True, False]
            assert not gc.isenabled()  # left as the caller had it
        finally:
            gc.enable()


def test_the_captured_program_is_collected_once_read(monkeypatch):
    """An export reads the program torch.export captured, then lets it go before the
    conversion: torch.export's own map of its last capture's nodes no longer keeps the
    graph and its fake tensors alive (0.6 MB of ResNet-50's first export)."""
    from oxport.frontends import exported

    captured: list[weakref.ref] = []
    read = exported.read

    def recording_read(program, *args, **kwargs):
        captured.extend([weakref.ref(program), weakref.ref(program.graph_module)])
        return read(program, *args, **kwargs)

    monkeypatch.setattr(exported, "read", recording_read)
    alive_at_convert: list[bool] = []

    def started(name: str) -> None:
        if name == "convert":
            alive_at_convert.append(any(ref() is not None for ref in captured))

    model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.ReLU()).eval()
    with progress.listening(_Phases(started)):
        oxport.convert(model, (torch.randn(2, 4),), dynamo=True)
    assert len(captured) == 2 and alive_at_convert == [False]


class Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(64, 16)
        self.out = nn.Linear(16, 64, bias=False)
        self.out.weight = self.embed.weight
        self.proj = nn.Linear(16, 16)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.out(self.proj(self.embed(ids)))


@pytest.mark.parametrize("external", [False, True])
def test_the_file_holds_each_unique_weight_once(tmp_path, monkeypatch, external):
    monkeypatch.setattr(serialize.weights, "EXTERNAL_MIN_BYTES", 0)  # every weight in the data file
    model, ids = Tied().eval(), torch.randint(0, 64, (2, 5))
    path = str(tmp_path / "m.onnx")
    oxport.export(model, (ids,), path, external_data=external, input_names=["ids"],
                  dynamic_axes={"ids": [0, 1]})
    unique = sum(p.numel() * 4 for p in model.parameters())  # parameters() lists tied once
    files = sorted(os.listdir(tmp_path))
    assert files == (["m.onnx", "m.onnx.data"] if external else ["m.onnx"])
    data_bytes = os.path.getsize(path + ".data") if external else os.path.getsize(path)
    assert unique <= data_bytes <= unique * 1.01 + (4096 if not external else 64 * 4)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for size in [(2, 5), (3, 9)]:
        x = torch.randint(0, 64, size)
        with torch.no_grad():
            expected = model(x).numpy()
        np.testing.assert_allclose(session.run(None, {"ids": x.numpy()})[0], expected,
                                   rtol=1e-3, atol=1e-5)


def test_one_file_per_weight_on_request(tmp_path, monkeypatch):
    monkeypatch.setattr(serialize.weights, "EXTERNAL_MIN_BYTES", 0)  # a file for every weight
    model, ids = Tied().eval(), torch.randint(0, 64, (2, 5))
    path = str(tmp_path / "m.onnx")
    oxport.export(model, (ids,), path, external_data="per_tensor")
    proto = onnx.load(path, load_external_data=False)
    locations = sorted(next(e.value for e in t.external_data if e.key == "location")
                       for t in proto.graph.initializer)
    assert sorted(os.listdir(tmp_path)) == sorted(["m.onnx", *locations])
    assert len(locations) == 3 and "m.onnx.embed.weight" in locations  # the tied weight once
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    with torch.no_grad():
        expected = model(ids).numpy()
    np.testing.assert_allclose(session.run(None, {session.get_inputs()[0].name: ids.numpy()})[0],
                               expected, rtol=1e-3, atol=1e-5)
    with pytest.raises(InvalidExportArgumentError, match="per_tensor"):
        oxport.export(model, (ids,), path, external_data="one_per_tensor")


class _Flatten(nn.Module):
    """A Reshape whose target folds to a small int64 initializer (a shape operand)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 300)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).reshape(x.shape[0], 3, 100)


@pytest.mark.parametrize("external", [True, "per_tensor"])
def test_small_initializers_stay_inline_beside_external_data(tmp_path, external):
    """ONNX Runtime reads a Reshape's target only from inline data (a GPT-2 past 2 GB
    failed to load when its shape operands were external)."""
    model, x = _Flatten().eval(), torch.randn(2, 16)
    path = str(tmp_path / "m.onnx")
    oxport.export(model, (x,), path, external_data=external, input_names=["x"],
                  dynamic_axes={"x": [0]})
    stored = onnx.load(path, load_external_data=False)
    inline = {t.name for t in stored.graph.initializer
              if t.data_location != onnx.TensorProto.EXTERNAL}
    external_names = {t.name for t in stored.graph.initializer} - inline
    assert external_names and all(
        onnx.numpy_helper.to_array(t).nbytes < serialize.weights.EXTERNAL_MIN_BYTES
        for t in stored.graph.initializer if t.name in inline)
    assert any(t.data_type == onnx.TensorProto.INT64 for t in stored.graph.initializer
               if t.name in inline)  # the Reshape target
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for batch in (2, 5):
        x = torch.randn(batch, 16)
        with torch.no_grad():
            expected = model(x).numpy()
        np.testing.assert_allclose(session.run(None, {"x": x.numpy()})[0], expected,
                                   rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("chunk", [48, 4])  # a few rows per chunk; rows past the chunk
@pytest.mark.parametrize("columns", [512, 2])  # one tile per band; tiles, the last partial
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bool])
@pytest.mark.parametrize("whole_transposes", [0, 1 << 20])  # banded, or in one copy
def test_strided_weights_are_written_rows_at_a_time(monkeypatch, dtype, chunk, columns,
                                                     whole_transposes):
    monkeypatch.setattr(serialize.weights, "GATHER_BYTES", chunk)
    monkeypatch.setattr(serialize.weights, "GATHER_COLUMNS", columns)
    monkeypatch.setattr(serialize.weights, "TRANSPOSE_BYTES", whole_transposes)
    base = torch.randn(7, 5) > 0 if dtype == torch.bool else torch.randn(7, 5).to(dtype)
    strided = base.t()  # a folded Transpose is such a view
    assert not strided.is_contiguous()
    every_other = base[::2]  # strided, not a transpose: always banded
    graph_weights = [serialize.Weight("w", strided), serialize.Weight("v", base),
                     serialize.Weight("u", every_other)]
    model = onnx.helper.make_model(onnx.helper.make_graph([], "g", [], []))
    data = serialize.to_bytes(serialize.Serialized(model, graph_weights, {}))
    loaded = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load_from_string(data).graph.initializer}
    np.testing.assert_array_equal(loaded["w"], strided.numpy())
    np.testing.assert_array_equal(loaded["v"], base.numpy())
    np.testing.assert_array_equal(loaded["u"], every_other.numpy())


def test_a_transposed_weight_past_the_chunk_size_runs_in_onnx_runtime(monkeypatch):
    monkeypatch.setattr(serialize.weights, "GATHER_BYTES", 100)
    monkeypatch.setattr(serialize.weights, "GATHER_COLUMNS", 16)
    model = nn.Linear(40, 30).eval()
    x = torch.randn(2, 3, 40)
    result = oxport.convert(model, (x,))
    assert any(not w.tensor.is_contiguous() for w in result.serialized.weights)
    session = ort.InferenceSession(result.to_bytes(), providers=["CPUExecutionProvider"])
    with torch.no_grad():
        expected = model(x).numpy()
    np.testing.assert_allclose(session.run(None, {session.get_inputs()[0].name: x.numpy()})[0],
                               expected, rtol=1e-3, atol=1e-5)
