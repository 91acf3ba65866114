"""int8 end to end: `runtime: onnx-int8` archives carry model.int8.onnx only and answer what the
in-process int8 predictor answers; the default archive (`runtime: auto`) carries both ONNX files,
chooses by the CPU, and answers a text alike alone and inside a full batch."""

from __future__ import annotations

import zipfile

import pytest

from clients.client import connect
from deploy.archive import build_archive
from handlers.runtime import resolve_runtime
from handlers.sentiment.predict import SentimentPredictor
from tests.fixtures.served import handler_config
from tests.support.torchserve import start_torchserve

TEXTS = ["A wonderful, moving film with a superb cast.", "Dull, overlong and badly acted."]


@pytest.fixture(scope="module")
def int8_server(sentiment_artifacts, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("int8")
    mar = build_archive(
        "sentiment", sentiment_artifacts, tmp / "store", runtime="onnx-int8", build_dir=tmp / "b"
    )
    server = start_torchserve(tmp / "serve", {"sentiment": mar})
    try:
        yield server, mar
    finally:
        server.stop()


def test_int8_archive_carries_only_the_int8_model(int8_server):
    names = set(zipfile.ZipFile(int8_server[1]).namelist())
    assert "model.int8.onnx" in names and not {"model.onnx", "model.pt"} & names


@pytest.mark.parametrize("protocol", ["rest", "grpc"])
def test_int8_served_answers_match_the_in_process_int8_predictor(
    int8_server, sentiment_artifacts, protocol
):
    server = int8_server[0]
    local = SentimentPredictor.from_dir(
        sentiment_artifacts, handler_config("sentiment") | {"runtime": "onnx-int8"}
    )
    with connect(protocol, server.client_settings()) as client:
        for text in TEXTS:
            # Dynamic int8 quantizes activations with one scale per runtime call; the predictor
            # runs each text alone, so served and in-process answers agree (the two sessions'
            # thread counts may differ, hence not exactly).
            want = local.predict([text])[0]
            got = client.predict("sentiment", {"text": text})
            assert got["label"] == want["label"]
            for label, p in want["probabilities"].items():
                assert got["probabilities"][label] == pytest.approx(p, abs=1e-4)


@pytest.fixture(scope="module")
def default_server(sentiment_artifacts, tmp_path_factory):
    """The archive `make archive` builds: the model-config's runtime (auto)."""
    tmp = tmp_path_factory.mktemp("auto")
    mar = build_archive("sentiment", sentiment_artifacts, tmp / "store", build_dir=tmp / "b")
    server = start_torchserve(tmp / "serve", {"sentiment": mar})
    try:
        yield server, mar
    finally:
        server.stop()


def test_the_default_archive_carries_both_onnx_files_and_picks_by_this_cpu(
    default_server, sentiment_artifacts
):
    names = set(zipfile.ZipFile(default_server[1]).namelist())
    assert {"model.onnx", "model.int8.onnx"} <= names and "model.pt" not in names
    # The worker logs what auto chose for this machine's CPU, and why: int8 with int8 dot
    # products (VNNI, AMX), fp32 without.
    kind, why = resolve_runtime("auto", sentiment_artifacts, "cpu")
    assert f"runtime={kind} (auto: {why})" in default_server[0].logs()


@pytest.mark.parametrize("protocol", ["rest", "grpc"])
def test_the_default_runtime_answers_a_text_alike_alone_and_in_a_full_batch(
    default_server, protocol
):
    """Eight texts in one request run as one batch in the worker: the text's answer there equals
    its answer alone (dynamic int8 on a padded batch moved it by up to 0.016 on the real model)."""
    neighbours = [
        "awful",
        "An astonishing film, the best of the year. " * 5,
        "meh",
        "I walked out after an hour; the dialogue is wooden. " * 4,
        "a small, warm, funny film",
        "Not good. Not bad. Just there.",
        "The cinematography is stunning " * 8,
    ]
    with connect(protocol, default_server[0].client_settings()) as client:
        alone = client.predict("sentiment", {"text": TEXTS[1]})
        for position in (0, 7):
            texts = [*neighbours[:position], TEXTS[1], *neighbours[position:]]
            inside = client.predict("sentiment", {"texts": texts})[position]
            for label, p in alone["probabilities"].items():
                assert inside["probabilities"][label] == pytest.approx(p, abs=1e-6)


def test_a_texts_answer_under_load_is_bitwise_its_answer_alone(default_server):
    """The workers share the cores (`share_cores`): alone a text runs on both, under load on one
    beside the other worker. Its answer must not move by a bit either way."""
    import threading

    settings = default_server[0].client_settings()
    with connect("rest", settings) as client:
        alone = client.predict("sentiment", {"text": TEXTS[0]})
    stop = threading.Event()
    errors: list[BaseException] = []

    def load() -> None:
        try:
            with connect("rest", settings) as other:
                while not stop.is_set():
                    other.predict("sentiment", {"text": "The cinematography is stunning " * 8})
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=load) for _ in range(6)]
    for t in threads:
        t.start()
    try:
        with connect("rest", settings) as client:
            busy = [client.predict("sentiment", {"text": TEXTS[0]}) for _ in range(12)]
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not errors
    for answer in busy:
        assert answer["probabilities"] == alone["probabilities"]
        assert answer["uncertainty"] == alone["uncertainty"]
