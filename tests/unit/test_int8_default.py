"""The default sentiment runtime (`auto`): the gated int8 export on a CPU, fp32 ONNX elsewhere or
when the gate refused int8, and answers that never depend on what a text was batched with."""

import shutil

import pytest

from handlers.errors import ArchiveError
from handlers.runtime import resolve_runtime
from handlers.sentiment.predict import SentimentPredictor
from handlers.sentiment.settings import SentimentSettings
from training.sentiment.quantize import INT8_FILE

TEXT = "The plot wanders, but the two leads are wonderful and the ending is earned."
NEIGHBOURS = [
    "awful",
    "An astonishing film, the best of the year: go and see it twice. " * 4,
    "meh",
    "I walked out after an hour; the dialogue is wooden and the pacing is glacial. " * 3,
    "a small, warm, funny film",
    "Not good. Not bad. Just there, like furniture.",
    "The cinematography is stunning " * 10,
]


def test_the_default_runtime_is_auto():
    assert SentimentSettings().runtime == "auto"


VNNI = {"avx2", "fma", "avx512f", "avx512_vnni"}
AVX2 = {"avx2", "fma"}


@pytest.fixture
def vnni_cpu(monkeypatch):
    """This machine seen as one with int8 dot products (CI's CPUs may have none)."""
    import handlers.runtime

    monkeypatch.setattr(handlers.runtime, "cpu_info", lambda *_: ("fake VNNI CPU", VNNI))


def test_auto_is_int8_on_a_cpu_with_int8_dot_products_when_the_gate_wrote_it(
    sentiment_artifacts, vnni_cpu
):
    assert (sentiment_artifacts / INT8_FILE).is_file()
    kind, why = resolve_runtime("auto", sentiment_artifacts, "cpu")
    assert kind == "onnx-int8" and "avx512_vnni" in why
    predictor = SentimentPredictor.from_dir(sentiment_artifacts, {"threads": 1})
    assert predictor.runtime_kind == "onnx-int8" and predictor.per_text


def test_auto_is_fp32_on_an_avx2_only_cpu_where_int8_is_no_faster(sentiment_artifacts):
    kind, why = resolve_runtime("auto", sentiment_artifacts, "cpu", flags=AVX2)
    assert kind == "onnx" and "no int8 dot-product" in why


def test_auto_is_fp32_on_an_accelerator():
    kind, why = resolve_runtime("auto", "/nonexistent", "cuda:0")
    assert kind == "onnx" and "cuda:0" in why


def test_auto_falls_back_to_fp32_with_the_reason_when_the_gate_refused(
    sentiment_artifacts, tmp_path, vnni_cpu
):
    refused = tmp_path / "art"
    shutil.copytree(sentiment_artifacts, refused)
    (refused / INT8_FILE).unlink()  # what the export leaves when the gate refuses
    kind, why = resolve_runtime("auto", refused, "cpu")
    assert kind == "onnx" and "gate" in why
    predictor = SentimentPredictor.from_dir(refused, {"threads": 1})
    assert predictor.runtime_kind == "onnx" and predictor.per_text  # fp32 alone too, on a CPU


def test_texts_run_alone_on_a_cpu_and_in_padded_batches_where_asked(sentiment_artifacts):
    fp32 = {"runtime": "onnx", "threads": 1}
    assert SentimentPredictor.from_dir(sentiment_artifacts, fp32).per_text
    padded = SentimentPredictor.from_dir(sentiment_artifacts, fp32 | {"texts_alone": False})
    assert not padded.per_text
    int8 = {"runtime": "onnx-int8", "texts_alone": False}  # int8 always alone: its answers
    assert SentimentPredictor.from_dir(sentiment_artifacts, int8).per_text  # depend on the batch


def test_a_named_runtime_is_not_second_guessed(sentiment_artifacts, tmp_path):
    assert resolve_runtime("onnx", sentiment_artifacts, "cpu")[0] == "onnx"
    assert resolve_runtime("onnx-int8", sentiment_artifacts, "cuda:0")[0] == "onnx-int8"
    refused = tmp_path / "art"
    shutil.copytree(sentiment_artifacts, refused)
    (refused / INT8_FILE).unlink()
    with pytest.raises(ArchiveError, match="no model.int8.onnx"):  # named: no quiet fallback
        SentimentPredictor.from_dir(refused, {"runtime": "onnx-int8"})


@pytest.mark.parametrize("runtime", ["auto", "onnx-int8", "onnx"])
def test_a_texts_answer_is_the_same_alone_and_in_a_full_batch(
    sentiment_artifacts, runtime, vnni_cpu
):
    predictor = SentimentPredictor.from_dir(sentiment_artifacts, {"runtime": runtime, "threads": 1})
    alone = predictor.predict([TEXT])[0]
    for position in (0, 3, 7):  # a full batch (batchSize 8), the text anywhere in it
        batch = [*NEIGHBOURS[:position], TEXT, *NEIGHBOURS[position:]]
        assert len(batch) == 8
        inside = predictor.predict(batch)[position]
        for label, p in alone["probabilities"].items():
            assert inside["probabilities"][label] == pytest.approx(p, abs=1e-6)
        for score in ("entropy", "mutual_information", "std"):
            assert inside["uncertainty"][score] == pytest.approx(
                alone["uncertainty"][score], abs=1e-6
            )
