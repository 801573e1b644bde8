"""Weights streamed from a checkpoint (``weights=``): a model built on the meta device is
captured without weights (dynamo=True) and each weight is written from its memory-mapped
safetensors shard, with the export's folds (a Linear weight's Transpose, a Cast, a Mul by a
constant) applied as it is written. The file is the in-memory export's, byte for byte, and
ONNX Runtime gives eager's results."""

from __future__ import annotations

import itertools
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from safetensors.torch import save_file

import oxport
from oxport.errors import InvalidExportArgumentError
from oxport.exporter import progress
from oxport.serialize.streamed import StreamedTensor

transformers = pytest.importorskip("transformers")
VOCAB = 97
#: Large enough that the weights are streamed (small ones are loaded when bound).
HIDDEN = 96
SOURCE_DTYPES = pytest.mark.parametrize(
    "dtype", [torch.bfloat16, torch.float16, torch.float32], ids=["bf16", "fp16", "fp32"])


def _config(tied: bool) -> object:
    return transformers.LlamaConfig(
        hidden_size=HIDDEN, intermediate_size=2 * HIDDEN, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=64,
        tie_word_embeddings=tied)


def _checkpoint(folder: str, dtype: torch.dtype, tied: bool = False) -> str:
    """A tiny Llama saved in ``dtype`` with save_pretrained, sharded (several files and
    model.safetensors.index.json)."""
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(_config(tied)).to(dtype)
    model.save_pretrained(folder, max_shard_size="100KB")
    return folder


def _meta_llama(folder: str) -> torch.nn.Module:
    config = transformers.AutoConfig.from_pretrained(folder)
    with oxport.empty_weights():
        return transformers.LlamaForCausalLM(config).eval()


def _loaded_llama(folder: str) -> torch.nn.Module:
    return transformers.LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()


def _export(model, path: str, **options) -> oxport.ExportResult:
    ids = torch.arange(6).reshape(1, 6) % VOCAB
    return oxport.export(model, (ids,), path, kwargs={"use_cache": False}, dynamo=True,
                         input_names=["input_ids"], **options)


def _weights(path: str) -> dict[str, np.ndarray]:
    model = onnx.load(path)
    return {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}


def _assert_same_weights(streamed: str, loaded: str) -> None:
    """The same initializers, name, dtype, shape and bytes (node names may differ: a
    symbolic computes a Cast of a loaded weight while converting, the streamed export
    writes the Cast node and folds it)."""
    ours, theirs = _weights(streamed), _weights(loaded)
    assert list(ours) == list(theirs)
    for name, array in ours.items():
        assert (array.dtype, array.shape) == (theirs[name].dtype, theirs[name].shape), name
        assert array.tobytes() == theirs[name].tobytes(), name


@SOURCE_DTYPES
def test_the_file_is_the_in_memory_exports_byte_for_byte(tmp_path, dtype):
    folder = _checkpoint(str(tmp_path / "ckpt"), dtype)
    assert os.path.exists(os.path.join(folder, "model.safetensors.index.json"))
    assert len([f for f in os.listdir(folder) if f.endswith(".safetensors")]) > 1
    streamed, loaded = str(tmp_path / "streamed.onnx"), str(tmp_path / "loaded.onnx")
    result = _export(_meta_llama(folder), streamed, weights=folder)
    _export(_loaded_llama(folder), loaded)
    with open(streamed, "rb") as a, open(loaded, "rb") as b:
        assert a.read() == b.read()
    # The folds were recorded on the weights, not computed: a Linear weight is written
    # through its Transpose.
    steps = {tuple(s.op_type for s in w.tensor.steps) for w in result.serialized.weights
             if isinstance(w.tensor, StreamedTensor)}
    assert ("Transpose",) in steps and () in steps


@SOURCE_DTYPES
def test_a_bf16_fp16_or_fp32_checkpoint_gives_eagers_logits_in_fp32(tmp_path, dtype):
    folder = _checkpoint(str(tmp_path / "ckpt"), dtype)
    path = str(tmp_path / "model.onnx")
    _export(_meta_llama(folder), path, weights=folder)
    weights = _weights(path)
    assert {w.dtype for w in weights.values() if w.size > 64} == {np.dtype(np.float32)}
    ids = torch.tensor([[3, 14, 15, 92, 65, 35]])
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    (logits,) = session.run(None, {"input_ids": ids.numpy()})
    with torch.no_grad():
        expected = _loaded_llama(folder)(ids, use_cache=False).logits.numpy()
    np.testing.assert_allclose(logits, expected, atol=1e-4, rtol=1e-4)


def test_tied_weights_are_written_once(tmp_path):
    folder = _checkpoint(str(tmp_path / "ckpt"), torch.float32, tied=True)
    streamed, loaded = str(tmp_path / "streamed.onnx"), str(tmp_path / "loaded.onnx")
    _export(_meta_llama(folder), streamed, weights=folder)
    _export(_loaded_llama(folder), loaded)
    embeddings = [name for name, w in _weights(streamed).items() if w.shape == (VOCAB, HIDDEN)]
    assert len(embeddings) == 1
    with open(streamed, "rb") as a, open(loaded, "rb") as b:
        assert a.read() == b.read()


def test_external_data_is_the_in_memory_exports(tmp_path):
    folder = _checkpoint(str(tmp_path / "ckpt"), torch.bfloat16)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    streamed, loaded = str(tmp_path / "a" / "model.onnx"), str(tmp_path / "b" / "model.onnx")
    _export(_meta_llama(folder), streamed, weights=folder, external_data=True)
    _export(_loaded_llama(folder), loaded, external_data=True)
    for name in ("model.onnx", "model.onnx.data"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert (tmp_path / "a" / "model.onnx.data").stat().st_size > 100_000


def test_large_external_data_is_written_past_the_page_cache_byte_for_byte(tmp_path,
                                                                           monkeypatch):
    from oxport.serialize import direct

    monkeypatch.setattr(direct, "DIRECT_MIN_BYTES", 0)
    monkeypatch.setattr(direct, "STAGING_BYTES", 3 * 4096)  # many whole buffers, a tail
    sent: list[int] = []
    send = direct.DirectWriter._send
    monkeypatch.setattr(direct.DirectWriter, "_send",
                        lambda self, data: (sent.append(len(data)), send(self, data))[1])
    folder = _checkpoint(str(tmp_path / "ckpt"), torch.bfloat16)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    streamed, loaded = str(tmp_path / "a" / "model.onnx"), str(tmp_path / "b" / "model.onnx")
    _export(_meta_llama(folder), streamed, weights=folder, external_data=True)
    assert len(sent) > 10 and set(sent[:-1]) == {3 * 4096}
    monkeypatch.setattr(direct, "DIRECT_MIN_BYTES", 1 << 62)  # through the page cache
    _export(_loaded_llama(folder), loaded, external_data=True)
    for name in ("model.onnx", "model.onnx.data"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    session = ort.InferenceSession(streamed, providers=["CPUExecutionProvider"])
    ids = torch.tensor([[3, 14, 15, 92, 65, 35]])
    (logits,) = session.run(None, {"input_ids": ids.numpy()})
    with torch.no_grad():
        expected = _loaded_llama(folder)(ids, use_cache=False).logits.numpy()
    np.testing.assert_allclose(logits, expected, atol=1e-4, rtol=1e-4)


def test_a_file_system_refusing_direct_writes_gets_the_same_bytes(tmp_path, monkeypatch):
    import errno

    from oxport.serialize import direct

    monkeypatch.setattr(direct, "DIRECT_MIN_BYTES", 0)
    monkeypatch.setattr(direct, "STAGING_BYTES", 4096)
    write_all = direct.DirectWriter._write_all
    refused: list[bool] = []

    def refusing(self, data):
        if self._direct:
            refused.append(True)
            raise OSError(errno.EINVAL, "Invalid argument")
        return write_all(self, data)

    monkeypatch.setattr(direct.DirectWriter, "_write_all", refusing)
    folder = _checkpoint(str(tmp_path / "ckpt"), torch.float16)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    threads = torch.get_num_threads()
    _export(_meta_llama(folder), str(tmp_path / "a" / "model.onnx"), weights=folder,
            external_data=True)
    assert refused == [True]  # once: then through the page cache
    assert torch.get_num_threads() == threads  # the writer's one thread, restored
    monkeypatch.setattr(direct, "DIRECT_MIN_BYTES", 1 << 62)
    _export(_loaded_llama(folder), str(tmp_path / "b" / "model.onnx"), external_data=True)
    for name in ("model.onnx", "model.onnx.data"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


class _Folds(torch.nn.Module):
    """A weight read through a Cast and a Transpose, and one scaled by a constant: the
    folds a streamed weight records."""

    def __init__(self) -> None:
        super().__init__()
        self.low = torch.nn.Parameter(torch.randn(96, 80, dtype=torch.float16))
        self.scaled = torch.nn.Parameter(torch.randn(96, 80))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.low.float().t() @ (self.scaled * 3.0)


def test_casts_and_arithmetic_on_weights_are_applied_as_they_are_written(tmp_path):
    torch.manual_seed(0)
    eager = _Folds().eval()
    checkpoint = str(tmp_path / "folds.safetensors")
    save_file(eager.state_dict(), checkpoint)
    with oxport.empty_weights():
        meta = _Folds().eval()
    x = torch.randn(3, 80)
    streamed, loaded = str(tmp_path / "streamed.onnx"), str(tmp_path / "loaded.onnx")
    result = oxport.export(meta, (x,), streamed, dynamo=True, weights=checkpoint)
    oxport.export(eager, (x,), loaded, dynamo=True)
    _assert_same_weights(streamed, loaded)
    steps = sorted(tuple(s.op_type for s in w.tensor.steps) for w in result.serialized.weights)
    assert steps == [("Cast", "Transpose"), ("Mul",)]
    session = ort.InferenceSession(streamed, providers=["CPUExecutionProvider"])
    (y,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    np.testing.assert_allclose(y, eager(x).detach().numpy(), rtol=1e-4, atol=1e-3)


def test_a_loader_mapping_gives_the_same_file(tmp_path):
    torch.manual_seed(0)
    eager = _Folds().eval()
    state = eager.state_dict()
    calls = []

    def loader(name: str):
        def load() -> torch.Tensor:
            calls.append(name)
            return state[name]
        return load

    with oxport.empty_weights():
        meta = _Folds().eval()
    x = torch.randn(3, 80)
    streamed, loaded = str(tmp_path / "streamed.onnx"), str(tmp_path / "loaded.onnx")
    oxport.export(meta, (x,), streamed, dynamo=True, weights={n: loader(n) for n in state})
    oxport.export(eager, (x,), loaded, dynamo=True)
    _assert_same_weights(streamed, loaded)
    assert sorted(calls) == ["low", "scaled"]  # each loaded once, when written


def test_progress_counts_the_bytes_written(tmp_path):
    folder = _checkpoint(str(tmp_path / "ckpt"), torch.bfloat16)
    seen: list[tuple[int, int]] = []

    class Listener:
        def phase_started(self, name: str) -> None: ...

        def phase_advanced(self, name: str, done: int, total: int) -> None:
            if name == "write":
                seen.append((done, total))

        def phase_finished(self, name: str, seconds: float) -> None: ...

    with progress.listening(Listener()):
        result = _export(_meta_llama(folder), str(tmp_path / "model.onnx"), weights=folder)
    total = sum(w.nbytes for w in result.serialized.weights)
    assert seen[-1] == (total, total) and len(seen) > 10
    assert all(a[0] <= b[0] for a, b in itertools.pairwise(seen))


# -- what is refused, and how -----------------------------------------------------------
def test_the_torchscript_front_end_refuses_a_meta_model(tmp_path):
    folder = _checkpoint(str(tmp_path / "ckpt"), torch.float32)
    ids = torch.zeros(1, 4, dtype=torch.long)
    with pytest.raises(InvalidExportArgumentError, match="meta device.*dynamo=True and weights="):
        oxport.export(_meta_llama(folder), (ids,), None, kwargs={"use_cache": False})
    with pytest.raises(InvalidExportArgumentError, match="weights=.*needs dynamo=True"):
        oxport.export(_meta_llama(folder), (ids,), None, kwargs={"use_cache": False},
                      weights=folder)


def test_a_meta_model_without_weights_is_refused_with_dynamo(tmp_path):
    folder = _checkpoint(str(tmp_path / "ckpt"), torch.float32)
    ids = torch.zeros(1, 4, dtype=torch.long)
    with pytest.raises(InvalidExportArgumentError, match="meta device.*pass weights="):
        oxport.export(_meta_llama(folder), (ids,), None, kwargs={"use_cache": False},
                      dynamo=True)


def test_missing_and_misshapen_weights_are_named(tmp_path):
    torch.manual_seed(0)
    with oxport.empty_weights():
        meta = _Folds().eval()
    x = torch.randn(3, 80)
    with pytest.raises(InvalidExportArgumentError, match="no tensor for 'scaled'"):
        oxport.export(meta, (x,), None, dynamo=True, weights={"low": torch.zeros(96, 80)})
    with pytest.raises(InvalidExportArgumentError, match=r"'scaled' is \[96, 81\] in weights="):
        oxport.export(meta, (x,), None, dynamo=True,
                      weights={"low": torch.zeros(96, 80), "scaled": torch.zeros(96, 81)})


def test_buffers_built_on_meta_are_refused_as_not_in_the_checkpoint(tmp_path):
    folder = _checkpoint(str(tmp_path / "ckpt"), torch.float32)
    config = transformers.AutoConfig.from_pretrained(folder)
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(config).eval()
    with pytest.raises(InvalidExportArgumentError, match="inv_freq.*oxport.empty_weights"):
        _export(model, None, weights=folder)


# -- the task layer -----------------------------------------------------------------------
def _binds(monkeypatch) -> list[str]:
    """Records each export that streamed weights (the weights= it bound)."""
    from oxport.serialize import streamed

    calls: list[str] = []
    bind = streamed.bind

    def spy(params, weights):
        calls.append(str(weights))
        return bind(params, weights)

    monkeypatch.setattr(streamed, "bind", spy)
    return calls


def test_a_task_with_dynamo_streams_a_safetensors_folder_by_default(tmp_path, monkeypatch):
    folder = _checkpoint(str(tmp_path / "ckpt"), torch.bfloat16)
    calls = _binds(monkeypatch)
    streamed, loaded = tmp_path / "streamed", tmp_path / "loaded"
    oxport.export_task(folder, streamed, "text-generation", dynamo=True)
    assert calls == [folder]
    oxport.export_task(folder, loaded, "text-generation", dynamo=True, stream_weights=False)
    assert calls == [folder]  # loaded in memory
    assert (streamed / "model.onnx").read_bytes() == (loaded / "model.onnx").read_bytes()
    assert (streamed / "config.json").is_file()
    oxport.export_task(folder, tmp_path / "traced", "text-generation")
    assert calls == [folder]  # tracing runs the model: loaded


def test_the_cli_streams_with_dynamo_and_loads_with_no_stream_weights(tmp_path, monkeypatch):
    from oxport.cli.main import main

    folder = _checkpoint(str(tmp_path / "ckpt"), torch.float16)
    calls = _binds(monkeypatch)
    streamed, loaded = tmp_path / "streamed", tmp_path / "loaded"
    assert main(["export", folder, "--task", "text-generation-with-past", "--dynamo",
                 "-o", str(streamed)]) == 0
    assert calls == [folder]
    assert main(["export", folder, "--task", "text-generation-with-past", "--dynamo",
                 "--no-stream-weights", "-o", str(loaded)]) == 0
    assert calls == [folder]
    assert (streamed / "model.onnx").read_bytes() == (loaded / "model.onnx").read_bytes()


def test_text_generation_with_past_streams_the_same_file_and_verifies(tmp_path):
    folder = _checkpoint(str(tmp_path / "ckpt"), torch.float32, tied=True)
    streamed, loaded = tmp_path / "streamed", tmp_path / "loaded"
    result = oxport.export_task(folder, streamed, "text-generation-with-past", dynamo=True,
                                stream_weights=True, verify=True)
    oxport.export_task(folder, loaded, "text-generation-with-past", dynamo=True,
                       stream_weights=False)
    assert (streamed / "model.onnx").read_bytes() == (loaded / "model.onnx").read_bytes()
    assert result.ok, result.verification


def test_streaming_a_task_needs_dynamo(tmp_path):
    folder = _checkpoint(str(tmp_path / "ckpt"), torch.bfloat16)
    with pytest.raises(InvalidExportArgumentError, match="needs dynamo=True"):
        oxport.export_task(folder, tmp_path / "out", "text-generation", stream_weights=True)


def test_a_weightless_model_runs_on_fake_tensors_for_its_example_inputs(tmp_path):
    from oxport.frontends.weightless import run_weightless

    folder = _checkpoint(str(tmp_path / "ckpt"), torch.float32)
    model = _meta_llama(folder)

    def cache() -> list[torch.Tensor]:
        out = model(input_ids=torch.zeros(2, 3, dtype=torch.long), use_cache=True)
        return [t for layer in out.past_key_values.layers for t in (layer.keys, layer.values)]

    with torch.no_grad():
        tensors = run_weightless(model, cache)
    assert [tuple(t.shape) for t in tensors] == [(2, 2, 3, HIDDEN // 4)] * 4
    assert all(not t.any() for t in tensors)  # zeros, real tensors
    assert model.lm_head.weight.is_meta  # the model is as it was


def _bands_read(monkeypatch) -> dict[str, list[tuple[int, int]]]:
    """Small bands, and a record of the (start, stop) rows each streamed weight is read in
    (by its repr)."""
    from oxport.serialize import streamed

    monkeypatch.setattr(streamed, "GATHER_BYTES", 4096)
    monkeypatch.setattr(streamed, "MIN_BAND_ROWS", 4)
    bands: dict[str, list[tuple[int, int]]] = {}
    rows = streamed.StreamedTensor._rows

    def spy(self, start, stop, out):
        bands.setdefault(repr(self), []).append((start, stop))
        return rows(self, start, stop, out)

    monkeypatch.setattr(streamed.StreamedTensor, "_rows", spy)
    return bands


def test_each_weight_is_written_in_bands_never_whole(tmp_path, monkeypatch):
    bands = _bands_read(monkeypatch)
    folder = _checkpoint(str(tmp_path / "ckpt"), torch.bfloat16)
    streamed_path, loaded = str(tmp_path / "streamed.onnx"), str(tmp_path / "loaded.onnx")
    _export(_meta_llama(folder), streamed_path, weights=folder)
    _export(_loaded_llama(folder), loaded)
    with open(streamed_path, "rb") as a, open(loaded, "rb") as b:
        assert a.read() == b.read()
    embedding = bands["StreamedTensor('model.embed_tokens.weight', [97, 96], torch.float32)"]
    assert len(embedding) > 5 and all(stop - start <= 11 for start, stop in embedding)
    transposed = [b for name, b in bands.items() if "Transpose" in name]
    assert transposed and all(len(b) > 1 for b in transposed)


class _Gathered(torch.nn.Module):
    """Rows of a weight at constant indices (positions of a static length): the Gather
    folds into a new weight."""

    def __init__(self) -> None:
        super().__init__()
        self.positions = torch.nn.Embedding(96, 80)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.positions(torch.arange(x.shape[0]))


def test_a_gather_at_constant_indices_is_applied_as_it_is_written(tmp_path):
    torch.manual_seed(0)
    eager = _Gathered().eval()
    checkpoint = str(tmp_path / "gathered.safetensors")
    save_file(eager.state_dict(), checkpoint)
    with oxport.empty_weights():
        meta = _Gathered().eval()
    x = torch.randn(7, 80)
    streamed, loaded = str(tmp_path / "streamed.onnx"), str(tmp_path / "loaded.onnx")
    result = oxport.export(meta, (x,), streamed, dynamo=True, weights=checkpoint)
    oxport.export(eager, (x,), loaded, dynamo=True)
    _assert_same_weights(streamed, loaded)
    assert [tuple(s.op_type for s in w.tensor.steps) for w in result.serialized.weights
            if isinstance(w.tensor, StreamedTensor)] == [("Gather",)]
    session = ort.InferenceSession(streamed, providers=["CPUExecutionProvider"])
    (y,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    np.testing.assert_allclose(y, eager(x).detach().numpy(), rtol=1e-6, atol=1e-6)


class _Normed(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(80, 96)
        self.norm = torch.nn.BatchNorm1d(96)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.linear(x))


def test_buffers_built_with_the_model_take_the_checkpoints_values(tmp_path):
    torch.manual_seed(0)
    eager = _Normed().eval()
    eager.norm.running_mean.normal_()
    eager.norm.running_var.uniform_(0.5, 2.0)
    checkpoint = str(tmp_path / "normed.safetensors")
    save_file(eager.state_dict(), checkpoint)
    with oxport.empty_weights():
        meta = _Normed().eval()
    assert not meta.norm.running_mean.is_meta and not meta.norm.running_mean.any()
    x = torch.randn(4, 80)
    streamed, loaded = str(tmp_path / "streamed.onnx"), str(tmp_path / "loaded.onnx")
    oxport.export(meta, (x,), streamed, dynamo=True, weights=checkpoint)
    oxport.export(eager, (x,), loaded, dynamo=True)
    _assert_same_weights(streamed, loaded)
    session = ort.InferenceSession(streamed, providers=["CPUExecutionProvider"])
    (y,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    np.testing.assert_allclose(y, eager(x).detach().numpy(), rtol=1e-4, atol=1e-4)


class _ConvNormed(torch.nn.Module):
    """A Conv and a ConvTranspose, each followed by a batch norm that folds into it."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(16, 32, 3, padding=1)
        self.norm = torch.nn.BatchNorm2d(32)
        self.up = torch.nn.ConvTranspose2d(32, 24, 3, bias=False)
        self.up_norm = torch.nn.BatchNorm2d(24)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.up_norm(self.up(torch.relu(self.norm(self.conv(x)))))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16],
                         ids=["fp32", "fp16", "bf16"])
def test_a_batch_norm_folds_into_a_streamed_convolution(tmp_path, dtype):
    torch.manual_seed(0)
    eager = _ConvNormed().eval()
    for norm in (eager.norm, eager.up_norm):
        norm.running_mean.normal_()
        norm.running_var.uniform_(0.5, 2.0)
        norm.weight.data.normal_()
    eager.to(dtype)
    checkpoint = str(tmp_path / "convs.safetensors")
    save_file(eager.state_dict(), checkpoint)
    with oxport.empty_weights():
        meta = _ConvNormed().eval().to(dtype)
    x = torch.randn(2, 16, 8, 8, dtype=dtype)
    streamed, loaded = str(tmp_path / "streamed.onnx"), str(tmp_path / "loaded.onnx")
    result = oxport.export(meta, (x,), streamed, dynamo=True, weights=checkpoint)
    oxport.export(eager, (x,), loaded, dynamo=True)
    ops = [n.op_type for n in onnx.load(streamed).graph.node]
    assert ops == [n.op_type for n in onnx.load(loaded).graph.node]
    _assert_same_weights(streamed, loaded)
    if dtype != torch.bfloat16:  # bf16 convolutions run between Casts: no fold in memory
        assert ops == ["Conv", "Relu", "ConvTranspose"]
        steps = sorted(tuple(s.op_type for s in w.tensor.steps)
                       for w in result.serialized.weights if isinstance(w.tensor, StreamedTensor))
        assert steps == [("BatchNormalization",)] * 2
    if dtype == torch.float32:
        session = ort.InferenceSession(streamed, providers=["CPUExecutionProvider"])
        (y,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
        np.testing.assert_allclose(y, eager(x).detach().numpy(), rtol=1e-4, atol=1e-4)



#: ONNX Runtime's logits against eager's for weights quantized in blocks of 32.
QUANTIZED_ATOL = {"int4": 0.25, "int8": 0.02}


@pytest.mark.parametrize("target", ["ort", "onnx"])
@pytest.mark.parametrize("quantize", ["int4", "int8"])
def test_quantized_weights_are_the_in_memory_exports_byte_for_byte(tmp_path, quantize, target):
    """``quantize=`` on streamed weights: each MatMul weight (the head too) quantized as the
    in-memory export quantizes it (MatMulNBits for ort: codes, scales and zero points
    computed band by band as they are written; a blocked DequantizeLinear at opset 21 for
    onnx), the same names and bytes, and ONNX Runtime near eager's logits."""
    folder = _checkpoint(str(tmp_path / "ckpt"), torch.bfloat16)
    streamed, loaded = str(tmp_path / "streamed.onnx"), str(tmp_path / "loaded.onnx")
    options = {"target": target, "quantize": quantize, "opset_version": 21}
    _export(_meta_llama(folder), streamed, weights=folder, **options)
    _export(_loaded_llama(folder), loaded, **options)
    with open(streamed, "rb") as a, open(loaded, "rb") as b:
        assert a.read() == b.read()
    graph = onnx.load(streamed).graph
    kind = "MatMulNBits" if target == "ort" else "DequantizeLinear"
    assert sum(n.op_type == kind for n in graph.node) == 2 * 7 + 1  # and no float MatMul
    assert not any(n.op_type == "MatMul" and n.input[1] in {i.name for i in graph.initializer}
                   for n in graph.node)
    ids = torch.tensor([[3, 14, 15, 92, 65, 35]])
    session = ort.InferenceSession(streamed, providers=["CPUExecutionProvider"])
    (logits,) = session.run(None, {"input_ids": ids.numpy()})
    with torch.no_grad():
        expected = _loaded_llama(folder)(ids, use_cache=False).logits.numpy()
    assert np.abs(logits - expected).max() < QUANTIZED_ATOL[quantize]


def test_quantized_weights_are_read_in_bands_never_whole(tmp_path, monkeypatch):
    """MatMulNBits' codes, scales and zero points of a streamed weight come from bands of
    rows of its transpose (the Linear weight as stored), the codes' bands keeping the
    scales and zero points written next: each weight is read once, a band at a time."""
    bands = _bands_read(monkeypatch)
    folder = _checkpoint(str(tmp_path / "ckpt"), torch.bfloat16)
    streamed_path, loaded = str(tmp_path / "streamed.onnx"), str(tmp_path / "loaded.onnx")
    options = {"target": "ort", "quantize": "int4"}
    _export(_meta_llama(folder), streamed_path, weights=folder, **options)
    _export(_loaded_llama(folder), loaded, **options)
    with open(streamed_path, "rb") as a, open(loaded, "rb") as b:
        assert a.read() == b.read()
    quantized = {name: b for name, b in bands.items() if ".Transpose.Transpose" in name}
    assert len(quantized) == 2 * 7 + 1
    for name, read in quantized.items():
        height = int(name.split("[")[1].split(",")[0])
        assert len(read) > 1 and all(stop - start < height for start, stop in read), name
        assert sorted(read) == read and sum(stop - start for start, stop in read) == height


@pytest.mark.parametrize("quantize", [None, "int4"])
def test_packed_attention_weights_of_a_task_for_ort_are_streamed(tmp_path, monkeypatch,
                                                                  quantize):
    """GroupQueryAttention's packed query, key and value weight of streamed weights (too
    large to be read when bound) is their concatenation computed band by band as written
    (and quantized so): the in-memory export's file, byte for byte. Norm weights larger
    than the small weights read when bound (a 70B model's 8192) are read too, as vectors:
    the norm fusions see them as in memory."""
    from oxport.serialize import streamed

    monkeypatch.setattr(streamed, "EAGER_MAX_ELEMENTS", 64)
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=64,
        bos_token_id=1, eos_token_id=2, pad_token_id=0)
    folder = str(tmp_path / "ckpt")
    transformers.LlamaForCausalLM(config).save_pretrained(folder)
    streamed, loaded = tmp_path / "streamed", tmp_path / "loaded"
    for path, stream in ((streamed, True), (loaded, False)):
        oxport.export_task(folder, path, "text-generation-with-past", dynamo=True,
                           target="ort", quantize=quantize, stream_weights=stream)
    assert (streamed / "model.onnx").read_bytes() == (loaded / "model.onnx").read_bytes()
    graph = onnx.load(str(streamed / "model.onnx")).graph
    assert sum(n.op_type == "GroupQueryAttention" for n in graph.node) == 2
    packed = [n for n in graph.node if n.op_type == "GroupQueryAttention" and not n.input[1]]
    assert len(packed) == 2
    assert sum(n.op_type == "SkipSimplifiedLayerNormalization" for n in graph.node) == 4


@pytest.mark.parametrize("target", ["ort", "onnx"])
def test_quantized_embeddings_and_a_float_head_are_the_in_memory_exports(tmp_path, target):
    """``quantize=`` as a dict on streamed weights: blocks of 16, the embedding table
    quantized (a blocked DequantizeLinear feeding its Gather), the head left float."""
    folder = _checkpoint(str(tmp_path / "ckpt"), torch.float16)
    streamed, loaded = str(tmp_path / "streamed.onnx"), str(tmp_path / "loaded.onnx")
    options = {"target": target, "opset_version": 21, "quantize": {
        "format": "int4", "block_size": 16, "lm_head": False, "embeddings": True}}
    _export(_meta_llama(folder), streamed, weights=folder, **options)
    _export(_loaded_llama(folder), loaded, **options)
    with open(streamed, "rb") as a, open(loaded, "rb") as b:
        assert a.read() == b.read()
    graph = onnx.load(streamed).graph
    head = [n for n in graph.node if n.output[0] == graph.output[0].name]
    assert [n.op_type for n in head] == ["MatMul"]
    gathers = [n for n in graph.node if n.op_type == "Gather"]
    producers = {o: n.op_type for n in graph.node for o in n.output}
    assert any(producers.get(n.input[0]) == "DequantizeLinear" for n in gathers)
    ids = torch.tensor([[3, 14, 15, 92, 65, 35]])
    session = ort.InferenceSession(streamed, providers=["CPUExecutionProvider"])
    (logits,) = session.run(None, {"input_ids": ids.numpy()})
    with torch.no_grad():
        expected = _loaded_llama(folder)(ids, use_cache=False).logits.numpy()
    assert np.abs(logits - expected).max() < QUANTIZED_ATOL["int4"]
