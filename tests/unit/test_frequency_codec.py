"""Request decoding: JSON and raw float32 bodies, parameters from gRPC inputs or headers, and refusals."""

import json

import numpy as np
import pytest

from handlers.base import request_from_row
from handlers.errors import (
    BadEncoding,
    BadField,
    EmptyInput,
    TooLarge,
    UnsupportedMediaType,
)
from handlers.frequency.model import FrequencyModel
from handlers.frequency.settings import parse_settings
from handlers.kits.signal import codec as fcodec

EXPORT = {
    "window": 50, "block": 10, "sample_rate": 1000, "frequencies": [1.0, 3.0, 5.0, 7.0], "hidden": 8, "layers": 1,
    "sequence": {"inputs": ["signal"], "outputs": ["output", "features"]},
    "step": {"inputs": ["signal", "h0", "c0"], "outputs": ["output", "features", "hn", "cn"],
             "files": {"onnx": "step.onnx", "torchscript": "step.pt"}},
}  # fmt: skip
SETTINGS = parse_settings({"handler": EXPORT}, {"max_samples": 100})
JSON_HEADERS = {"body": {"content-type": "application/json"}}
RAW_HEADERS = {"body": {"content-type": "application/octet-stream"}}


def decode_request(row: dict, headers: dict, settings) -> fcodec.SignalRequest:
    """A TorchServe row as the worker reads it: the adapter's Request, then the model's codec."""
    request = request_from_row(row, headers, None, FrequencyModel.reads_parts)
    return fcodec.decode_request(request, settings)


def test_json_request_defaults_to_all_frequencies():
    req = decode_request({"body": {"signal": [0.1, 0.2, 3]}}, JSON_HEADERS, SETTINGS)
    assert req.signal.dtype == np.float32 and req.signal.tolist() == pytest.approx([0.1, 0.2, 3])
    assert req.frequencies == (1.0, 3.0, 5.0, 7.0) and req.selectors == (0, 1, 2, 3)


def test_json_request_selects_frequencies_in_request_order():
    req = decode_request(
        {"body": {"signal": [0.0], "sample_rate": 1000, "frequencies": [7, 3, 7]}},
        JSON_HEADERS,
        SETTINGS,
    )
    assert req.frequencies == (7.0, 3.0) and req.selectors == (3, 1)


def test_raw_float32_body_with_grpc_input_parameters():
    x = np.array([0.5, -1.25, 2.0], dtype="<f4")
    row = {"body": bytearray(x.tobytes()), "sample_rate": b"1000", "frequencies": b"3,5"}
    req = decode_request(row, RAW_HEADERS, SETTINGS)
    np.testing.assert_array_equal(req.signal, x)
    assert req.frequencies == (3.0, 5.0)


def test_raw_float32_body_with_header_parameters():
    x = np.array([0.5, 0.25], dtype="<f4")
    req = decode_request({"body": x.tobytes()}, RAW_HEADERS | {"X-Frequencies": "1"}, SETTINGS)
    assert req.frequencies == (1.0,) and req.signal.tolist() == [0.5, 0.25]


def test_json_text_body_is_decoded():
    body = json.dumps({"signal": [1, 2]}).encode()
    assert (
        decode_request(
            {"body": body}, {"body": {"content-type": "text/plain"}}, SETTINGS
        ).signal.size
        == 2
    )


@pytest.mark.parametrize(
    "body,error,words",
    [
        ({"signal": [1.0, float("nan")]}, BadField, "NaN"),
        ({"signal": [1.0, float("inf")]}, BadField, "infinite"),
        ({"signal": [1.0, "x"]}, BadField, "only numbers"),
        ({"signal": [1.0, True]}, BadField, "only numbers"),
        ({"signal": [1.0, 10**400]}, BadField, "float32 range"),
        ({"signal": [1.0, 1e39]}, BadField, "float32 range"),
        ({"signal": [[1.0]]}, BadField, "only numbers"),
        ({"signal": "1,2"}, BadField, "array"),
        ({"signal": []}, EmptyInput, "empty"),
        ({"samples": [1.0]}, BadField, "no 'signal'"),
        ({"signal": [1.0], "sample_rate": 500}, BadField, "sample_rate"),
        ({"signal": [1.0], "sample_rate": "fast"}, BadField, "sample_rate"),
        ({"signal": [1.0], "frequencies": [2]}, BadField, "unsupported frequency 2"),
        ({"signal": [1.0], "frequencies": []}, BadField, "empty"),
        ({"signal": [0.0] * 101}, TooLarge, "limit is 100"),
        ([1, 2, 3], BadField, "object"),
    ],
)
def test_bad_json_requests_are_refused_with_a_reason(body, error, words):
    with pytest.raises(error) as e:
        decode_request({"body": body}, JSON_HEADERS, SETTINGS)
    assert e.value.status == 400 and words in e.value.reason


def test_bad_raw_and_undecodable_bodies_are_refused():
    with pytest.raises(BadEncoding, match="multiple of 4"):
        decode_request({"body": b"\x00\x00\x80"}, RAW_HEADERS, SETTINGS)
    with pytest.raises(BadField, match="NaN"):
        decode_request({"body": np.array([np.nan], "<f4").tobytes()}, RAW_HEADERS, SETTINGS)
    with pytest.raises(BadEncoding, match="JSON"):
        decode_request({"body": b"{not json"}, JSON_HEADERS, SETTINGS)
    with pytest.raises(UnsupportedMediaType) as e:
        decode_request({"body": b"\x01\x02"}, {"body": {"content-type": "image/png"}}, SETTINGS)
    assert e.value.status == 415


def test_one_shot_by_default_and_streams_start_or_continue_from_the_body():
    one = decode_request({"body": {"signal": [0.1]}}, JSON_HEADERS, SETTINGS)
    assert not one.streaming and not one.binary_answer
    start = decode_request({"body": {"signal": [0.1], "stream": True}}, JSON_HEADERS, SETTINGS)
    assert start.start and start.state is None and start.streaming
    more = decode_request({"body": {"signal": [0.1], "state": "abc"}}, JSON_HEADERS, SETTINGS)
    assert more.state == "abc" and not more.start and not more.frequencies_given
    off = decode_request({"body": {"signal": [0.1], "stream": False}}, JSON_HEADERS, SETTINGS)
    assert not off.streaming


def test_float32_streams_use_the_stream_headers_and_accept_asks_for_float32():
    raw = {"body": np.array([0.5], "<f4").tobytes()}
    start = decode_request(raw, RAW_HEADERS | {"X-Stream": "Start"}, SETTINGS)
    assert start.start and not start.binary_answer
    more = decode_request(
        raw,
        RAW_HEADERS
        | {"x-stream-state": "abc", "Accept": "application/json, application/octet-stream"},
        SETTINGS,
    )
    assert more.state == "abc" and more.binary_answer and not more.frequencies_given
    grpc = decode_request(raw | {"x-stream-state": b"abc"}, RAW_HEADERS, SETTINGS)
    assert grpc.state == "abc"  # gRPC inputs arrive as request parameters


@pytest.mark.parametrize(
    ("body", "headers", "words"),
    [
        ({"signal": [0.1], "stream": "yes"}, JSON_HEADERS, "'stream' must be true or false"),
        ({"signal": [0.1], "state": 5}, JSON_HEADERS, "'state' must be the string"),
        ({"signal": [0.1], "stream": True, "state": "a"}, JSON_HEADERS, "not both"),
        (np.array([0.5], "<f4").tobytes(), RAW_HEADERS | {"X-Stream": "yes"}, "must be 'start'"),
        (
            np.array([0.5], "<f4").tobytes(),
            RAW_HEADERS | {"X-Stream": "start", "X-Stream-State": "a"},
            "not both",
        ),
    ],
)
def test_contradictory_stream_fields_are_refused(body, headers, words):
    with pytest.raises(BadField) as e:
        decode_request({"body": body}, headers, SETTINGS)
    assert words in e.value.reason


@pytest.mark.parametrize(
    "manifest,config,words",
    [
        ({"handler": EXPORT}, {"mc_seed": 1}, "unknown frequency handler settings: mc_seed"),
        ({"handler": {k: v for k, v in EXPORT.items() if k != "window"}}, {}, "no 'window'"),
        ({"handler": EXPORT | {"step": {"inputs": [], "outputs": []}}}, {}, "no 'files'"),
        ({"handler": EXPORT}, {"hop": 51}, "hop must be in"),
        ({"handler": EXPORT}, {"max_samples": "many"}, "handler.max_samples"),
        ({}, {}, "no handler block"),
    ],
)
def test_bad_frequency_settings_fail_at_load_naming_the_key(manifest, config, words):
    """As strict as sentiment's: the message names the key, never a bare KeyError('window')."""
    from handlers.errors import ArchiveError

    with pytest.raises(ArchiveError) as e:
        parse_settings(manifest, config)
    assert words in str(e.value) and "KeyError" not in str(e.value)
