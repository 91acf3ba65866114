"""handlers.runtime: TorchScript and ONNX Runtime behind one interface, same names, same numbers."""

import numpy as np
import pytest
import torch

from handlers.errors import ArchiveError
from handlers.runtime import OnnxRuntime, device_from_properties, load_runtime

NAMES_IN, NAMES_OUT = ("x", "mask"), ("score", "features")


class Toy(torch.nn.Module):
    """Two inputs, two outputs, a dynamic batch and length: the shape of the real exports."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(3, 4)

    def forward(self, x, mask):
        h = self.proj(x) * mask.unsqueeze(-1).to(x.dtype)
        feats = h.sum(1) / mask.sum(1, keepdim=True).clamp(min=1).to(x.dtype)
        return feats.sum(-1, keepdim=True), feats


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    d = tmp_path_factory.mktemp("runtime")
    torch.manual_seed(0)
    model = Toy().eval()
    args = (torch.randn(2, 5, 3), torch.ones(2, 5, dtype=torch.int64))
    torch.jit.trace(model, args).save(str(d / "model.pt"))
    axes = {
        "x": {0: "b", 1: "t"},
        "mask": {0: "b", 1: "t"},
        "score": {0: "b"},
        "features": {0: "b"},
    }
    torch.onnx.export(
        model, args, str(d / "model.onnx"), input_names=list(NAMES_IN),
        output_names=list(NAMES_OUT), dynamic_axes=axes, dynamo=False,
    )  # fmt: skip
    return d, model


def _inputs(batch, length):
    rng = np.random.default_rng(batch * 100 + length)
    mask = np.ones((batch, length), dtype=np.int64)
    mask[0, length // 2 :] = 0
    return {"x": rng.normal(size=(batch, length, 3)).astype(np.float32), "mask": mask}


@pytest.mark.parametrize("kind", ["onnx", "torchscript"])
def test_runtime_matches_eager_at_unseen_shapes(exported, kind):
    d, model = exported
    rt = load_runtime(kind, d, NAMES_IN, NAMES_OUT, threads=1)
    for batch, length in [(1, 1), (3, 11)]:
        inputs = _inputs(batch, length)
        got = rt.run(inputs)
        assert set(got) == set(NAMES_OUT)
        with torch.no_grad():
            want = model(*(torch.from_numpy(inputs[n]) for n in NAMES_IN))
        for name, w in zip(NAMES_OUT, want, strict=True):
            assert got[name].shape == tuple(w.shape)
            np.testing.assert_allclose(got[name], w.numpy(), atol=1e-5)


def test_unknown_runtime_kind_is_an_archive_error(exported):
    with pytest.raises(ArchiveError, match="runtime must be one of"):
        load_runtime("tensorrt", exported[0], NAMES_IN, NAMES_OUT)


def test_missing_export_file_is_an_archive_error(tmp_path):
    with pytest.raises(ArchiveError, match="no model.onnx"):
        load_runtime("onnx", tmp_path, NAMES_IN, NAMES_OUT)


def test_onnx_inputs_must_match_the_manifest(exported):
    with pytest.raises(ArchiveError, match="differ from the manifest"):
        OnnxRuntime(exported[0] / "model.onnx", ("input_ids", "attention_mask"), NAMES_OUT)


def test_device_comes_from_gpu_id_only_when_cuda_exists():
    # environ={}: a deployment that does not require a GPU (TS_REQUIRE_GPU unset), on this machine.
    assert device_from_properties({}, environ={}) == "cpu"
    assert device_from_properties({"gpu_id": None}, environ={}) == "cpu"
    if torch.cuda.is_available():
        assert device_from_properties({"gpu_id": 0}, environ={}) == "cuda:0"
    else:
        assert device_from_properties({"gpu_id": 1}, environ={}) in ("cpu", "mps")
