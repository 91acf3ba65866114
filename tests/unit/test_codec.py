"""handlers.codec: every shape TorchServe hands a body over in → one Payload or a RequestError
(through the TorchServe adapter's row → Request rule, handlers/base.request_from_row)."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from handlers.base import request_from_row
from handlers.codec import decode, decode_request, media_type, request_body
from handlers.errors import BadEncoding, BadField, UnsupportedMediaType


def decode_row(row: dict, headers: dict | None, binary: tuple[str, ...] = ()):
    """A TorchServe row decoded as a worker does: the adapter's Request, then the codec (a model
    with binary types reads named parts)."""
    return decode_request(request_from_row(row, headers or {}, None, bool(binary)), binary)


def content_type_of(headers: dict | None, param: str = "body") -> str | None:
    """The media type the adapter gives the body sent as `param`."""
    return request_from_row({param: b""}, headers or {}).media_type


def test_json_already_parsed_by_torchserve_passes_through():
    assert decode({"text": "hi"}, "application/json").value == {"text": "hi"}
    assert decode([1, 2], "application/json").kind == "json"


def test_json_string_parsed_by_torchserve_stays_a_json_string_not_text():
    # Body `"hi"` with Content-Type application/json: a JSON value of the wrong type, not plain text.
    payload = decode("hi", "application/json")
    assert (payload.kind, payload.value) == ("json", "hi")


@pytest.mark.parametrize("raw", [b'{"text": "hi"}', bytearray(b'{"text": "hi"}')])
def test_json_bytes_are_parsed_when_torchserve_left_them_raw(raw):
    # e.g. `application/json; charset=utf-8`, which TorchServe does not parse itself.
    assert decode(raw, "application/json; charset=utf-8").value == {"text": "hi"}


def test_bad_json_is_a_bad_encoding_with_its_position():
    with pytest.raises(BadEncoding, match="not valid JSON.*position 1"):
        decode(b"{oops", "application/json")


def test_non_utf8_json_is_a_bad_encoding():
    with pytest.raises(BadEncoding, match="UTF-8"):
        decode(b'{"text": "\xff"}', "application/json")


def test_text_plain_str_and_bytes_decode_to_the_same_text():
    assert decode("héllo", "text/plain").value == "héllo"
    assert decode("héllo".encode(), "text/plain; charset=utf-8") == decode("héllo", "text/plain")


def test_non_utf8_text_is_a_bad_encoding():
    with pytest.raises(BadEncoding):
        decode(b"\xff\xfe\xfd", "text/plain")


@pytest.mark.parametrize(
    "ctype", ["", "application/octet-stream", "application/x-www-form-urlencoded"]
)
def test_without_a_useful_content_type_the_body_decides(ctype):
    assert decode(b'  {"text": "a"}', ctype).value == {"text": "a"}
    assert decode(b"just words", ctype).value == "just words"
    assert decode(b"just words", ctype).kind == "text"
    with pytest.raises(BadEncoding):
        decode(b"{not json", ctype)


def test_unsupported_media_type_is_415():
    with pytest.raises(UnsupportedMediaType) as e:
        decode(b"\x89PNG", "image/png")
    assert e.value.status == 415
    assert e.value.to_body()["error"].startswith("content type 'image/png'")


def test_media_type_drops_parameters_and_case():
    assert media_type("Application/JSON; charset=UTF-8") == "application/json"
    assert media_type(None) == ""


def test_parameter_content_type_wins_over_request_header():
    headers = {"body": {"content-type": "text/plain"}, "Content-Type": "application/json"}
    assert content_type_of(headers, "body") == "text/plain"
    assert content_type_of({"content-type": "application/json"}, "body") == "application/json"
    assert content_type_of(None) == ""


def test_request_body_finds_rest_body_grpc_data_or_a_single_field():
    assert request_from_row({"body": b"x"}, {}).body == b"x"
    assert request_from_row({"data": b"y"}, {}).body == b"y"
    assert request_from_row({"input": b"z"}, {}).body == b"z"
    with pytest.raises(BadField):
        decode_row({}, {})
    with pytest.raises(BadField):
        decode_row({"a": 1, "b": 2}, {})


def test_decode_request_uses_the_row_and_its_headers():
    row = {"body": b"plain words"}
    assert decode_row(row, {"body": {"content-type": "text/plain"}}).kind == "text"


@given(st.text(alphabet=st.characters(exclude_categories=("Cs",))))
def test_any_text_survives_utf8_transport(text):
    assert decode(text.encode("utf-8"), "text/plain").value == text


@given(st.dictionaries(st.text(), st.one_of(st.text(), st.integers(), st.none(), st.booleans())))
def test_any_json_object_survives_byte_transport(obj):
    assert decode(json.dumps(obj).encode(), "application/json").value == obj


def test_multipart_part_without_its_own_type_is_sniffed_not_refused():
    headers = {"data": {"content-type": ""}, "Content-Type": "multipart/form-data; boundary=x"}
    assert content_type_of(headers, "data") == ""
    assert decode_row({"data": b"great movie"}, headers).value == "great movie"


def test_form_encoded_request_that_torchserve_emptied_gets_a_415_hint():
    with pytest.raises(UnsupportedMediaType, match="form-encoded"):
        decode_row({}, {"Content-Type": "application/x-www-form-urlencoded"})
    with pytest.raises(BadField, match="no body"):
        decode_row({}, {})


def test_a_models_binary_types_stay_bytes_and_its_parameters_are_not_bodies():
    from handlers.codec import Payload

    raw = b"\x00\x00\x80?"
    headers = {"body": {"content-type": "application/octet-stream"}}
    binary = ("application/octet-stream",)
    assert decode_row({"body": bytearray(raw)}, headers, binary) == Payload("binary", raw)
    # Without binary types the same body is sniffed as text (sentiment's contract).
    assert decode_row({"body": b"hi"}, headers).kind == "text"
    # With them, a lone form field is a parameter, not the body.
    with pytest.raises(BadField, match="form parts"):
        decode_row({"sample_rate": b"1000"}, {}, binary)
    with pytest.raises(UnsupportedMediaType, match="application/octet-stream"):
        decode_row({"body": b"x"}, {"body": {"content-type": "image/png"}}, binary)


def test_a_multipart_request_of_several_parts_is_one_400_not_its_body_part_alone():
    """TorchServe hands each form part over as a parameter with its own headers entry; the body
    part ("data") was read and the other part dropped unseen, and the request answered 200."""
    headers = {
        "data": {"content-type": "text/plain"},
        "other": {"content-type": "text/plain"},
        "Content-Type": "multipart/form-data; boundary=x",
    }
    row = {"data": b"great movie", "other": b"ignored"}
    with pytest.raises(BadField, match="multipart request of 2 parts") as info:
        decode_row(row, headers)
    assert info.value.status == 400
    with pytest.raises(BadField, match="2 parts"):
        request_body(request_from_row(row, headers))
    # One part is a body like any other.
    one = {k: v for k, v in headers.items() if k != "other"}
    assert decode_row({"data": b"great movie"}, one).value == "great movie"


def test_a_model_with_named_parameters_reads_them_beside_a_multipart_body():
    headers = {
        "body": {"content-type": "application/octet-stream"},
        "sample_rate": {"content-type": ""},
        "Content-Type": "multipart/form-data; boundary=x",
    }
    binary = ("application/octet-stream",)
    row = {"body": b"\x00\x00\x80?", "sample_rate": b"1000"}
    assert decode_row(row, headers, binary).kind == "binary"
