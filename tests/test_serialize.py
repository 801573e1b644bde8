"""The serializer: IR versions, opset imports, output shapes, external data, atomic writes,
and weights copied at most once."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from torch import nn

import oxport
from oxport import serialize
from oxport.errors import InvalidExportArgumentError, OnnxExporterError
from oxport.testing import max_runtime_opset
from tests.helpers import export_proto

torch.manual_seed(0)
TOL = {"rtol": 1e-4, "atol": 1e-6}


class MLP(nn.Module):
    def __init__(self, width: int = 32) -> None:
        super().__init__()
        self.a = nn.Linear(8, width)
        self.b = nn.Linear(width, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


def _run(path: str, x: torch.Tensor) -> np.ndarray:
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]


def _dims(value_info: onnx.ValueInfoProto) -> list:
    return [d.dim_param or (d.dim_value if d.HasField("dim_value") else None)
            for d in value_info.type.tensor_type.shape.dim]


# -- IR version and opset imports -----------------------------------------------------------
@pytest.mark.parametrize("opset", range(7, 27))
def test_ir_version_matches_the_opset(opset):
    proto = oxport.convert(MLP().eval(), torch.randn(2, 8), opset_version=opset).model_proto
    expected = onnx.helper.find_min_ir_version_for([onnx.helper.make_opsetid("", opset)], True)
    assert proto.ir_version == expected
    assert proto.ir_version < 14  # ONNX Runtime 1.31 rejects IR 14
    if opset <= max_runtime_opset():
        ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])


def test_ir_version_covers_every_domain():
    model = onnx.ModelProto()
    model.opset_import.extend([onnx.helper.make_opsetid("", 13),
                               onnx.helper.make_opsetid("ai.onnx.ml", 4),
                               onnx.helper.make_opsetid("my.domain", 1)])
    assert serialize.ir_version(model) == onnx.helper.find_min_ir_version_for(
        list(model.opset_import), ignore_unknown=True)
    assert serialize.ir_version(model) == 9  # ai.onnx.ml 4 needs IR 9; 13 alone needs 7


# -- output shapes with dynamic axes ------------------------------------------------------
class Shapes(nn.Module):
    def forward(self, x):
        flat = x.view(x.size(0), -1)   # Reshape to a computed shape
        return x.flatten(1) * 2, flat + 1


def test_dynamic_outputs_get_inferred_dims_never_stale_static_ones(tmp_path):
    f = str(tmp_path / "m.onnx")
    oxport.export(Shapes(), torch.randn(2, 3, 4), f, input_names=["x"],
                  output_names=["scaled", "flat"], dynamic_axes={"x": {0: "batch"}})
    proto = onnx.load(f)
    assert _dims(proto.graph.input[0]) == ["batch", 3, 4]
    assert _dims(proto.graph.output[0]) == ["batch", 12]
    flat = _dims(proto.graph.output[1])
    assert len(flat) == 2 and flat[0] in ("batch", None) and 2 not in flat
    x = torch.randn(5, 3, 4)
    session = ort.InferenceSession(f, providers=["CPUExecutionProvider"])
    scaled, flat_out = session.run(None, {"x": x.numpy()})
    np.testing.assert_allclose(scaled, (x.flatten(1) * 2).numpy(), **TOL)
    assert flat_out.shape == (5, 12)


def test_named_output_axes_win_over_inference(tmp_path):
    f = str(tmp_path / "m.onnx")
    oxport.export(MLP(), torch.randn(2, 8), f, input_names=["x"], output_names=["y"],
                  dynamic_axes={"x": {0: "batch"}, "y": {0: "rows"}})
    assert _dims(onnx.load(f).graph.output[0]) == ["rows", 4]


def test_unnamed_dims_of_a_named_output_are_inferred_too(tmp_path):
    """``y`` names only axis 0, but its axis 1 follows the input's dynamic axis 1."""
    f = str(tmp_path / "m.onnx")
    oxport.export(Shapes(), torch.randn(2, 3, 4), f, input_names=["x"],
                  output_names=["scaled", "flat"],
                  dynamic_axes={"x": {0: "batch", 2: "width"}, "scaled": {0: "rows"}})
    dims = _dims(onnx.load(f).graph.output[0])
    assert dims[0] == "rows" and dims[1] != 12


def test_output_shapes_use_one_shape_inference_on_a_weightless_model(monkeypatch):
    calls = []
    original = onnx.shape_inference.infer_shapes

    def spy(model, *args, **kwargs):
        calls.append(model)
        return original(model, *args, **kwargs)

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", spy)
    model = MLP(64)
    oxport.convert(model, torch.randn(2, 8), check=False)
    assert calls == []  # static shapes: nothing to infer
    oxport.convert(model, torch.randn(2, 8), input_names=["x"], dynamic_axes={"x": [0]},
                   check=False)
    assert len(calls) == 1
    probe = calls[0]
    assert len(probe.graph.initializer) == 0
    assert probe.ByteSize() < 8 * 64 * 4  # no weight bytes, only their types


def test_inference_failure_leaves_output_dims_open(monkeypatch):
    def fail(*args, **kwargs):
        raise onnx.shape_inference.InferenceError("cannot infer")

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", fail)
    proto = oxport.convert(MLP(), torch.randn(2, 8), input_names=["x"],
                           dynamic_axes={"x": [0]}, check=False).model_proto
    assert _dims(proto.graph.output[0]) == [None, None]


# -- external data ----------------------------------------------------------------------
def test_external_data_past_the_threshold(tmp_path, monkeypatch):
    monkeypatch.setattr(serialize.weights, "EXTERNAL_DATA_THRESHOLD", 1024)
    monkeypatch.setattr(serialize.weights, "EXTERNAL_MIN_BYTES", 0)  # every weight external
    model, x = MLP().eval(), torch.randn(3, 8)
    f = str(tmp_path / "big.onnx")
    oxport.export(model, x, f)
    assert sorted(os.listdir(tmp_path)) == ["big.onnx", "big.onnx.data"]
    stored = onnx.load(f, load_external_data=False)
    assert all(t.data_location == onnx.TensorProto.EXTERNAL for t in stored.graph.initializer)
    assert {e.value for t in stored.graph.initializer for e in t.external_data
            if e.key == "location"} == {"big.onnx.data"}
    assert os.path.getsize(f) < 4096
    loaded = onnx.load(f)
    onnx.checker.check_model(loaded, full_check=True)
    state = {k: v.numpy() for k, v in model.state_dict().items()}
    for tensor in loaded.graph.initializer:
        np.testing.assert_array_equal(onnx.numpy_helper.to_array(tensor), state[tensor.name])
    np.testing.assert_allclose(_run(f, x), model(x).detach().numpy(), **TOL)


@pytest.mark.parametrize("threshold, forced, external", [
    (1024, False, False), (2**31, True, True), (2**31, None, False)])
def test_external_data_argument_overrides_the_threshold(tmp_path, monkeypatch, threshold,
                                                        forced, external):
    monkeypatch.setattr(serialize.weights, "EXTERNAL_DATA_THRESHOLD", threshold)
    model, x = MLP().eval(), torch.randn(3, 8)
    f = str(tmp_path / "m.onnx")
    oxport.export(model, x, f, external_data=forced)
    expected = ["m.onnx", "m.onnx.data"] if external else ["m.onnx"]
    assert sorted(os.listdir(tmp_path)) == expected
    np.testing.assert_allclose(_run(f, x), model(x).detach().numpy(), **TOL)


def test_external_data_needs_a_path(monkeypatch):
    with pytest.raises(InvalidExportArgumentError, match="export to a file path"):
        oxport.export(MLP(), torch.randn(2, 8), io.BytesIO(), external_data=True)


def test_more_than_2gb_without_external_data_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(serialize.weights, "PROTOBUF_LIMIT", 1024)
    with pytest.raises(InvalidExportArgumentError, match="external_data=None"):
        oxport.export(MLP(), torch.randn(2, 8), str(tmp_path / "m.onnx"), external_data=False)
    assert os.listdir(tmp_path) == []


# -- atomic writes ---------------------------------------------------------------------------
def _explode_after_partial_write(monkeypatch, name: str) -> None:
    original = getattr(serialize.weights, name)

    def partial(serialized, handle, *args):
        handle.write(b"partial model bytes")
        raise OSError(28, "No space left on device")

    assert callable(original)
    monkeypatch.setattr(serialize.weights, name, partial)


@pytest.mark.parametrize("external", [False, True])
def test_a_failed_write_leaves_no_file_and_no_temp_file(tmp_path, monkeypatch, external):
    _explode_after_partial_write(monkeypatch, "external" if external else "stream")
    with pytest.raises(OnnxExporterError, match="No space left on device"):
        oxport.export(MLP(), torch.randn(2, 8), str(tmp_path / "m.onnx"),
                      external_data=external)
    assert os.listdir(tmp_path) == []


def test_a_failed_write_keeps_the_previous_file_untouched(tmp_path, monkeypatch):
    target = tmp_path / "m.onnx"
    target.write_bytes(b"the previous model")
    _explode_after_partial_write(monkeypatch, "stream")
    with pytest.raises(OnnxExporterError, match="nothing was written"):
        oxport.export(MLP(), torch.randn(2, 8), str(target))
    assert target.read_bytes() == b"the previous model"
    assert os.listdir(tmp_path) == ["m.onnx"]


def test_a_successful_write_replaces_the_previous_file(tmp_path):
    target = tmp_path / "m.onnx"
    target.write_bytes(b"the previous model")
    oxport.export(MLP(), torch.randn(2, 8), str(target))
    assert onnx.load(str(target)).graph.node
    assert os.listdir(tmp_path) == ["m.onnx"]


def test_written_files_get_the_umask_permissions_and_no_one_sets_the_umask(tmp_path):
    """The files of a write get ``0o666 & ~umask``, as a plain ``open`` gives them, and
    neither importing oxport nor writing sets the process's umask (which would race
    threads creating files): a fresh interpreter with umask 0o027 counts the calls."""
    script = textwrap.dedent(f"""
        import os
        os.umask(0o027)
        real_umask, calls = os.umask, []
        os.umask = lambda mask: calls.append(mask) or real_umask(mask)
        import torch
        import oxport
        from oxport import serialize
        serialize.weights.EXTERNAL_DATA_THRESHOLD = 16  # a data file beside the model
        oxport.export(torch.nn.Linear(8, 8), (torch.randn(2, 8),), {str(tmp_path / "m.onnx")!r})
        assert calls == [], calls
    """)
    subprocess.run([sys.executable, "-c", script], check=True)
    assert sorted(os.listdir(tmp_path)) == ["m.onnx", "m.onnx.data"]
    for name in ("m.onnx", "m.onnx.data"):
        assert os.stat(tmp_path / name).st_mode & 0o777 == 0o640


# -- crash-safe writes: failures and kills at every step ------------------------------------
WRITE_MODES = [False, True, "per_tensor"]


class _Steps:
    """Counts the steps of a write (temporary file created, weight written, journal written,
    file renamed; with ``removals``, file removed) and calls ``at_step()`` at step number
    ``stop``."""

    def __init__(self, monkeypatch, stop: int, at_step, removals: bool = False) -> None:
        self.count, self.stop, self.at_step = 0, stop, at_step
        steps = [(os, "open"), (serialize.weights.Writer, "weight"), (json, "dump"),
                 (os, "replace")]
        for owner, name in steps + ([(os, "unlink")] if removals else []):
            monkeypatch.setattr(owner, name, self._counted(getattr(owner, name)))

    def _counted(self, fn):
        def step(*args, **kwargs):
            self.count += 1
            if self.count == self.stop:
                self.at_step()
            return fn(*args, **kwargs)
        return step


def _mlp_pair(tmp_path, monkeypatch, external):
    """An MLP exported to ``m.onnx`` (its files' bytes), and a second MLP with other weights
    serialized for the same path."""
    monkeypatch.setattr(serialize.weights, "EXTERNAL_MIN_BYTES", 0)  # every weight in a data file
    old, new = MLP().eval(), MLP().eval()
    path = str(tmp_path / "m.onnx")
    oxport.export(old, torch.randn(2, 8), path, external_data=external)
    files = {name: (tmp_path / name).read_bytes() for name in os.listdir(tmp_path)}
    return old, new, path, files, oxport.convert(new, torch.randn(2, 8)).serialized


@pytest.mark.parametrize("external", WRITE_MODES)
def test_a_failure_at_any_step_of_the_write_leaves_the_previous_files_as_they_were(
        tmp_path, monkeypatch, external):
    old, new, path, files, serialized = _mlp_pair(tmp_path, monkeypatch, external)

    def fail() -> None:
        raise OSError(5, "Input/output error")

    stop = 0
    while True:
        stop += 1
        with monkeypatch.context() as patched:
            steps = _Steps(patched, stop, fail)
            try:
                serialize.write(serialized, path, external_data=external)
            except OnnxExporterError as exc:
                assert "Input/output error" in str(exc) and "nothing was written" in str(exc)
            else:
                assert steps.count < stop  # every step failed once before this run
                break
        assert {name: (tmp_path / name).read_bytes() for name in os.listdir(tmp_path)} == files, \
            f"failure at step {stop}"
    assert stop > (9 if external == "per_tensor" else 5 if external else 2)
    x = torch.randn(2, 8)
    np.testing.assert_allclose(_run(path, x), new(x).detach().numpy(), **TOL)


@pytest.mark.parametrize("external, signum", [
    *((mode, signal.SIGKILL) for mode in WRITE_MODES), (True, signal.SIGTERM)])
def test_a_writer_killed_at_any_step_is_cleaned_up_by_the_next_export_to_the_folder(
        tmp_path, monkeypatch, external, signum):
    """A kill at every step (no cleanup runs in the writer); the next export to the folder
    leaves either the old model or the new one, complete, and no temporary file."""
    old, new, path, files, serialized = _mlp_pair(tmp_path, monkeypatch, external)
    x = torch.randn(2, 8)
    outputs = {"old": old(x).detach().numpy(), "new": new(x).detach().numpy()}
    seen, left_behind = [], []
    while True:
        pid = os.fork()
        if pid == 0:  # the writer: killed at step len(seen) + 1, or done (exit status 0)
            try:
                with monkeypatch.context() as patched:
                    _Steps(patched, len(seen) + 1,
                           lambda: os.kill(os.getpid(), signum), removals=True)
                    serialize.write(serialized, path, external_data=external)
            finally:
                os._exit(0)
        status = os.waitpid(pid, 0)[1]
        if status == 0:
            break
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signum
        left_behind.append(any(name.startswith(".") for name in os.listdir(tmp_path)))
        oxport.export(MLP(), torch.randn(2, 8), str(tmp_path / "other.onnx"))  # cleans up
        os.unlink(tmp_path / "other.onnx")
        assert not [name for name in os.listdir(tmp_path) if name.startswith(".")]
        result = _run(path, x)
        seen.append(next(k for k, v in outputs.items() if np.allclose(result, v, **TOL)))
        if seen[-1] == "old":  # rolled back: byte for byte what was there
            assert {n: (tmp_path / n).read_bytes() for n in os.listdir(tmp_path)} == files
        else:  # finished: the new model and its weights only
            assert sorted(os.listdir(tmp_path)) == sorted(files)
            oxport.export(old, torch.randn(2, 8), path, external_data=external)  # start again
    # Killed before the model's rename the old model stays, after it the new one.
    assert seen == sorted(seen, key=["old", "new"].index) and seen[0] == "old"
    assert ("new" in seen) == bool(external)  # the backups are removed after the rename
    assert sum(left_behind) >= len(seen) - 1  # all but a kill before the first file
    np.testing.assert_allclose(_run(path, x), outputs["new"], **TOL)


def test_temporary_files_of_running_writers_and_other_hosts_are_left_alone(tmp_path):
    mine = tmp_path / f".m.onnx.oxport-{serialize.atomic._host()}-{serialize.atomic._process()}-abc.tmp"
    elsewhere = tmp_path / ".m.onnx.oxport-otherhost-1-abc.tmp"
    foreign = tmp_path / ".m.onnx.1234.tmp"
    for path in (mine, elsewhere, foreign):
        path.write_bytes(b"in progress")
    oxport.export(MLP(), torch.randn(2, 8), str(tmp_path / "m.onnx"))
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["m.onnx", mine.name, elsewhere.name, foreign.name])


@pytest.mark.skipif(serialize.atomic._start_time(os.getpid()) is None,
                    reason="no process start times here (/proc)")
@pytest.mark.parametrize("kind", ["tmp", "bak", "journal"])
def test_files_of_a_dead_writer_whose_pid_a_later_process_got_are_removed(tmp_path, kind):
    """A restarted container's process often gets the pid its killed predecessor had: the
    start time in the name tells them apart, so the predecessor's files are still removed."""
    start = serialize.atomic._start_time(os.getpid())
    earlier = tmp_path / f".m.onnx.oxport-{serialize.atomic._host()}-{os.getpid()}.{start - 1}-abc.{kind}"
    earlier.write_bytes(b"{}" if kind == "journal" else b"left by a killed writer")
    oxport.export(MLP(), torch.randn(2, 8), str(tmp_path / "other.onnx"))
    assert sorted(os.listdir(tmp_path)) == ["other.onnx"]


def test_per_tensor_weights_of_two_models_in_one_folder_do_not_collide(tmp_path, monkeypatch):
    monkeypatch.setattr(serialize.weights, "EXTERNAL_MIN_BYTES", 0)
    models = {name: MLP().eval() for name in ("a.onnx", "b.onnx")}
    for name, model in models.items():
        oxport.export(model, torch.randn(2, 8), str(tmp_path / name), external_data="per_tensor")
    assert sorted(os.listdir(tmp_path)) == sorted(
        f"{model}{suffix}" for model in models
        for suffix in ("", ".a.weight", ".a.bias", ".b.weight", ".b.bias"))
    x = torch.randn(2, 8)
    for name, model in models.items():
        np.testing.assert_allclose(_run(str(tmp_path / name), x), model(x).detach().numpy(),
                                   **TOL)


# -- weights are copied at most once --------------------------------------------------------
@pytest.mark.parametrize("to_path", [True, False])
def test_weight_bytes_never_pass_through_tensor_proto(tmp_path, monkeypatch, to_path):
    """On the way to a file the serializer streams raw tensor memory; ``tensor_proto()``
    (which copies bytes into a TensorProto) only ever sees small constants."""
    seen: list[int] = []
    original = serialize.tensor_proto

    def spy(name, tensor):
        seen.append(serialize.Weight(name, tensor).nbytes)
        return original(name, tensor)

    for module in (serialize, serialize.proto, serialize.weights):
        monkeypatch.setattr(module, "tensor_proto", spy)
    model, x = MLP(256).eval(), torch.randn(2, 8)
    target = str(tmp_path / "m.onnx") if to_path else io.BytesIO()
    result = oxport.export(model, x, target)
    smallest_weight = min(p.numel() * 4 for p in model.parameters())
    assert all(n < smallest_weight for n in seen), seen  # only scalar constants
    assert result.serialized.weight_bytes > 8000
    assert result.serialized.model.ByteSize() < 1024  # the proto holds no weight bytes
    data = open(target, "rb").read() if to_path else target.getvalue()
    assert len(data) < result.serialized.weight_bytes + 4096
    loaded = onnx.load_from_string(data)
    state = model.state_dict()
    for tensor in loaded.graph.initializer:
        np.testing.assert_array_equal(onnx.numpy_helper.to_array(tensor),
                                      state[tensor.name].numpy())


def test_raw_bytes_share_memory_with_the_tensor():
    weight = torch.randn(64, 64)
    view = serialize.raw_bytes(weight)
    assert np.shares_memory(np.frombuffer(view, dtype=np.uint8), weight.numpy())


def test_to_bytes_matches_the_complete_model_proto():
    result = oxport.convert(MLP().eval(), torch.randn(2, 8))
    streamed = onnx.load_from_string(result.to_bytes())
    complete = result.model_proto
    assert streamed.SerializeToString(deterministic=True) == \
        complete.SerializeToString(deterministic=True)


def test_tied_weights_are_stored_once(tmp_path):
    class Tied(nn.Module):
        def __init__(self, bias: bool) -> None:
            super().__init__()
            self.a = nn.Linear(6, 6, bias=bias)
            self.b = nn.Linear(6, 6, bias=bias)
            self.b.weight = self.a.weight

        def forward(self, x):
            return self.b(self.a(x))

    x = torch.randn(2, 6)
    for bias, count in ((True, 3), (False, 1)):
        model = Tied(bias).eval()
        f = str(tmp_path / "m.onnx")
        oxport.export(model, x, f)
        names = [t.name for t in onnx.load(f).graph.initializer]
        assert len(names) == count  # without bias the folded weight transpose is shared too
        assert names.count("a.weight") == bias
        np.testing.assert_allclose(_run(f, x), model(x).detach().numpy(), **TOL)


class Classifier(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())
        self.classifier = torch.nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h = self.features(x)
        return self.classifier(h), h, x * 2


def test_unnamed_outputs_follow_the_module_path_that_made_them():
    x = torch.randn(2, 4)
    outputs = [o.name for o in export_proto(Classifier().eval(), (x,)).graph.output]
    assert outputs[:2] == ["classifier/Gemm", "features.1/Relu"]
    assert outputs[2].startswith("Mul")  # made at the top level: its own name
    given = export_proto(Classifier().eval(), (x,), output_names=["logits"]).graph.output
    assert [o.name for o in given][:2] == ["logits", "features.1/Relu"]
