"""`runtime: onnx-int8` end to end: the archive built from the tiny export carries model.int8.onnx
only, a real TorchServe loads it from another directory, and REST and gRPC answer what the
in-process int8 predictor answers."""

from __future__ import annotations

import zipfile

import pytest

from clients.client import connect
from deploy.archive import build_archive
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
            # One at a time on both sides: dynamic int8 quantizes activations with one scale per
            # batch, so a text's answer moves by ~1e-4 with what it is batched with.
            want = local.predict([text])[0]
            got = client.predict("sentiment", {"text": text})
            assert got["label"] == want["label"]
            for label, p in want["probabilities"].items():
                assert got["probabilities"][label] == pytest.approx(p, abs=1e-4)
