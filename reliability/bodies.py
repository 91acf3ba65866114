"""Hypothesis strategies for malformed request bodies: what a careless or hostile client sends.

Each draw is a `Body` (content type + raw bytes + a short label of what kind of damage it carries),
so a failing example reads as "truncated-json application/json b'{\"te'" rather than raw bytes.
Bodies stay well under `max_request_size`: the oversize case has its own test.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from hypothesis import strategies as st

from tools import registry

VALID_EXAMPLES: dict[str, dict] = {m.name: m.example() for m in registry.MODELS} | {
    "standin": {"text": "hello there"},
}
"""One good body per model (its EXAMPLE hook, tools/<model>/samples.py): the fuzzer damages
these, so it also reaches the field validation."""

CONTENT_TYPES = (
    "application/json",
    "application/json; charset=utf-8",
    "application/json; charset=latin-1",
    "text/plain",
    "application/octet-stream",
    "application/x-www-form-urlencoded",
    "image/png",
    "multipart/form-data; boundary=xyz",
    "application/xml",
    "",
)


@dataclass(frozen=True)
class Body:
    kind: str
    content_type: str
    data: bytes
    headers: tuple[tuple[str, bytes], ...] = ()
    """Extra request headers, as raw bytes (UTF-8 or Latin-1: both reach TorchServe)."""

    def request_headers(self) -> dict[str, str | bytes]:
        """Content-Type (when set) and the extra headers; an extra Content-Type wins."""
        own: dict[str, str | bytes] = (
            {"Content-Type": self.content_type} if self.content_type else {}
        )
        return own | dict(self.headers)

    def __repr__(self) -> str:
        extra = f", headers={self.headers!r}" if self.headers else ""
        return f"Body({self.kind}, {self.content_type!r}, {self.data[:120]!r}{'...' if len(self.data) > 120 else ''}, {len(self.data)} bytes{extra})"


def valid_example(model: str) -> dict:
    return VALID_EXAMPLES.get(model, VALID_EXAMPLES["standin"])


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=20,
)

# Literals that are not (standard) JSON numbers, or numbers no float holds.
NUMBER_LITERALS = (
    "NaN",
    "-Infinity",
    "Infinity",
    "1e999",
    "-1e999",
    "9" * 400,
    "1" + "0" * 5000,
    "-0",
    "0x10",
    "1e-400",
)
NASTY_TEXT = st.one_of(
    st.text(alphabet=st.characters(max_codepoint=0x1F), max_size=50),  # control characters
    st.sampled_from(
        ["\x00", "\u202e", "\ufeff", "\u200b" * 50, "\U0001f600" * 20, " " * 30, "\n\t\r"]
    ),
    st.text(max_size=200),
)


NON_ASCII_NUMBERS = ("١٠٠٠", "१०००", "１０００", "١٠", "٣", "1_000", "Ⅻ", "²")
"""Numbers Python's float()/int() accept (or that look like numbers) but no client means."""

READ_HEADERS = (
    "Content-Type",
    "Content-Encoding",
    "Accept",
    "X-Sample-Rate",
    "X-Frequencies",
    "X-Stream",
    "X-Stream-State",
)
"""Every request header a handler reads or echoes: each gets non-ASCII and control characters."""

HEADER_TEXT = st.one_of(
    st.sampled_from(
        [
            "tëxt/ü",
            "application/json; charset=ü",
            "application/octet-stream; x=ü",
            "gzip",
            "br, gzip",
            "ü",
            "stream-ü",
            "\u202e\u200b",
            "\x01\x7f",
            "a\tb",
            "\U0001f600",
            *NON_ASCII_NUMBERS,
        ]
    ),
    # http.client refuses CR and LF inside a value; every other character goes on the wire.
    st.text(alphabet=st.characters(blacklist_characters="\r\n"), min_size=1, max_size=40),
)


def _dumps(value: object) -> bytes:
    return json.dumps(value, allow_nan=True).encode()


@st.composite
def mutated_examples(draw, model: str) -> Body:
    """The model's valid body with one field damaged: wrong type, nasty text, odd numbers."""
    example = dict(valid_example(model))
    key = draw(st.sampled_from(sorted(example) + ["unexpected"]))
    how = draw(st.sampled_from(["value", "text", "number", "numerals", "drop", "wrap"]))
    if how == "value":
        example[key] = draw(json_values)
    elif how == "numerals":
        example[key] = draw(st.sampled_from(NON_ASCII_NUMBERS))
    elif how == "text":
        example[key] = draw(NASTY_TEXT)
    elif how == "drop":
        example.pop(key, None)
    elif how == "wrap":
        example = draw(
            st.sampled_from([[example], {"data": example}, {"body": example}, [example] * 3])
        )
    else:
        literal = draw(st.sampled_from(NUMBER_LITERALS))
        raw = _dumps({k: v for k, v in example.items() if k != key})[:-1]
        sep = ", " if len(raw) > 1 else ""
        return Body(
            f"number:{literal[:12]}",
            "application/json",
            f'{raw.decode()}{sep}"{key}": {literal}}}'.encode(),
        )
    return Body(f"mutated:{how}", draw(st.sampled_from(CONTENT_TYPES[:3])), _dumps(example))


@st.composite
def truncated_json(draw, model: str) -> Body:
    whole = _dumps(valid_example(model))
    cut = draw(st.integers(min_value=0, max_value=len(whole) - 1))
    return Body("truncated-json", "application/json", whole[:cut])


@st.composite
def deeply_nested(draw, model: str) -> Body:
    depth = draw(st.sampled_from([100, 1_000, 10_000, 100_000]))
    opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
    inner = opener * depth + "1" + closer * depth
    key = sorted(valid_example(model))[0]
    data = draw(st.sampled_from([inner, f'{{"{key}": {inner}}}']))
    return Body(f"nested:{depth}", "application/json", data.encode())


@st.composite
def invalid_utf8(draw, model: str) -> Body:
    good = _dumps(valid_example(model))
    junk = draw(
        st.sampled_from(
            [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80" * 8]
        )
    )
    at = draw(st.integers(min_value=0, max_value=len(good)))
    return Body("invalid-utf8", draw(st.sampled_from(CONTENT_TYPES)), good[:at] + junk + good[at:])


@st.composite
def lone_surrogates(draw, model: str) -> Body:
    """Valid JSON whose string decodes to a lone UTF-16 surrogate: legal JSON, not legal Unicode."""
    key = sorted(valid_example(model))[0]
    esc = draw(st.sampled_from(["\\ud800", "\\udfff", "abc\\ud83d", "\\u0000"]))
    return Body("lone-surrogate", "application/json", f'{{"{key}": "{esc}"}}'.encode())


@st.composite
def raw_bytes(draw) -> Body:
    return Body("random-bytes", draw(st.sampled_from(CONTENT_TYPES)), draw(st.binary(max_size=300)))


@st.composite
def random_json(draw) -> Body:
    return Body("random-json", draw(st.sampled_from(CONTENT_TYPES[:3])), _dumps(draw(json_values)))


@st.composite
def big_fields(draw, model: str) -> Body:
    """Large but under max_request_size: the model's own limits must answer, not the worker die."""
    key = draw(st.sampled_from(sorted(valid_example(model))))
    size = draw(st.sampled_from([10_000, 100_000, 400_000]))
    value = draw(
        st.sampled_from(
            ["x" * size, "word " * (size // 5), [0.25] * (size // 5), [[1.0]] * (size // 10)]
        )
    )
    return Body(
        f"big:{key}:{size}", "application/json", _dumps(valid_example(model) | {key: value})
    )


@st.composite
def nasty_headers(draw, model: str) -> Body:
    """A valid body (JSON, or float32 samples for a model that takes them) with one header the
    handlers read carrying non-ASCII or control characters, as UTF-8 or Latin-1 bytes."""
    name = draw(st.sampled_from(READ_HEADERS))
    text = draw(HEADER_TEXT).strip() or "ü"
    raw = text.encode(draw(st.sampled_from(["utf-8", "latin-1"])), "replace")
    binary = registry.get(model).samples().binary_example if model in registry.names() else None
    if binary is not None and draw(st.booleans()):
        data, ctype, _ = binary()
    else:
        data, ctype = _dumps(valid_example(model)), "application/json"
    return Body(f"header:{name}", ctype, data, ((name, raw),))


EMPTY = st.sampled_from(
    [Body("empty", ct, b"") for ct in CONTENT_TYPES]
    + [Body("whitespace", "application/json", b"  \n ")]
)


def malformed_bodies(model: str) -> st.SearchStrategy[Body]:
    return st.one_of(
        mutated_examples(model),
        truncated_json(model),
        deeply_nested(model),
        invalid_utf8(model),
        lone_surrogates(model),
        raw_bytes(),
        random_json(),
        big_fields(model),
        nasty_headers(model),
        EMPTY,
    )
