"""Every answer and refusal the sentiment model gives to a fixed set of requests, recorded to the
bit: held-out-like reviews short and long (past the window: head+tail truncation), alone and many
to a request, batched as TorchServe batches them; JSON, text/plain and sniffed bodies, as the
client's bytes and as a server's parsed JSON; explanations of short texts (a pass per word) and
long ones (word groups, then words); batches past the token and explanation budgets; bad inputs of
every kind the codec and the text kit refuse. Under three servings: as the archive serves it
(MC-dropout over the head, each text alone), MC-dropout of one sample with padded batches and
leave-one-word-out explanations, and the int8 export.

Run by tests/unit/test_sentiment_answers.py twice: in process over this checkout's handlers/, and
as a script (`python tests/support/sentiment_answers.py ARTIFACTS OUT.json`) with PYTHONPATH
naming another checkout's handlers/ (the code at a fixed commit, read with `git archive`). It
imports nothing but `handlers.service` of whichever code is on the path, the standard library and
PyYAML.
"""

from __future__ import annotations

import base64
import json
import random
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT_OF_DOMAIN = HERE.parent / "fixtures" / "data" / "sentiment_out_of_domain.tsv"
CONFIGS: list[dict[str, Any]] = [
    {"runtime": "onnx", "threads": 1},
    {
        "runtime": "onnx",
        "threads": 1,
        "mc_samples": 1,
        "seed": 3,
        "texts_alone": False,
        "explain_method": "ablation",
    },
    {"runtime": "onnx-int8", "threads": 1, "explain_passes": 12},
]
"""As served (model-config.yaml's limits, fp32 ONNX on one thread: MC-dropout of 16, each text
alone); one MC sample with padded batches and leave-one-word-out; the gated int8 export, with
explanations of 12 passes (the tiny window holds 30 tokens: past 11 words, word groups first)."""
JSON = {"Content-Type": "application/json"}
TEXT = {"Content-Type": "text/plain; charset=utf-8"}
BATCH = 8
"""TorchServe's batchSize for sentiment (model-config.yaml)."""

OPENINGS = [
    "I went in expecting little and",
    "After all the hype,",
    "My partner picked this one and",
    "Third time watching it:",
    "Honestly,",
    "From the first scene",
]
VERDICTS = [
    "the acting is superb and the script never wastes a line.",
    "it is dull, overlong and badly edited.",
    "the soundtrack carries scenes the dialogue cannot.",
    "I checked my watch every ten minutes and regretted the ticket.",
    "the cast is wonderful, the ending moved the whole theatre to tears.",
    "the plot holes are big enough to drive a truck through.",
    "it is a quiet, patient film that rewards attention.",
    "nothing works: the jokes land flat and the villain is a cardboard cutout.",
    "the cinematography alone is worth the price.",
    "a mess -- but an entertaining one, with two great performances!",
]


def reviews(n: int, seed: int, sentences: tuple[int, int]) -> list[str]:
    """Movie-review-like texts of `sentences` (low, high) sentences each."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        parts = [
            f"{rng.choice(OPENINGS)} {rng.choice(VERDICTS)}" for _ in range(rng.randint(*sentences))
        ]
        out.append(" ".join(parts))
    return out


def out_of_domain() -> list[str]:
    rows = [line.split("\t") for line in OUT_OF_DOMAIN.read_text().splitlines()]
    return [r[2] for r in rows if len(r) == 3 and not r[0].startswith("#")]


def requests() -> list[list[tuple[Any, dict, bool]]]:
    """Batches of (body, headers, explain)."""
    short = reviews(48, 1, (1, 2))
    long = reviews(24, 2, (6, 14))  # past the tiny window (32 tokens): head+tail truncation
    other = out_of_domain()
    batches: list[list[tuple[Any, dict, bool]]] = []
    # One text to a request, JSON, text/plain and sniffed bodies, batched 8 at a time.
    singles: list[tuple[Any, dict, bool]] = []
    for i, text in enumerate(short + long + other):
        if i % 4 == 1:
            singles.append((text.encode(), TEXT, False))
        elif i % 4 == 3:
            singles.append((text.encode(), {"Content-Type": "application/octet-stream"}, False))
        else:
            singles.append(({"text": text}, JSON, False))
    batches += [singles[i : i + BATCH] for i in range(0, len(singles), BATCH)]
    # Many to a request, mixed lengths (padding to the longest where texts are batched).
    batches.append(
        [
            ({"texts": short[:16]}, JSON, False),
            ({"texts": long[:5] + short[16:19]}, JSON, False),
            ({"texts": [other[0]]}, JSON, False),
            ({"texts": [long[5], "ok", long[6]]}, JSON, False),
        ]
    )
    # Explanations beside predictions: short (a pass per word) and long (groups, then words).
    batches.append(
        [
            ({"text": short[20]}, JSON, True),
            ({"text": short[21]}, JSON, False),
            ({"text": long[7]}, JSON, True),
            (long[8].encode(), TEXT, True),
            ({"texts": [short[22], "Great!", long[9]]}, JSON, True),
            ({"text": "... -- !!"}, JSON, True),
        ]
    )
    # Past the batch's token budget (5120): 503 + Retry-After for the requests after it.
    full = {"texts": (long * 2)[:16]}
    batches.append([(full, JSON, False)] * 12)
    # Explanations: past the per-request limit (400) and past the batch's budget (503).
    batches.append([({"texts": long[:16]}, JSON, True)])
    batches.append([({"texts": long[:8]}, JSON, True)] * 3 + [({"text": short[0]}, JSON, True)])
    # Bad inputs.
    bad: list[tuple[Any, dict, bool]] = [
        ({"text": ""}, JSON, False),
        ({"text": "   \n\t "}, JSON, False),
        (b"", TEXT, False),
        (b"   ", TEXT, False),
        (b"", JSON, False),
        ({"texts": []}, JSON, False),
        ({"texts": ["fine", ""]}, JSON, False),
        ({"texts": ["fine"] * 17}, JSON, False),
        ({"text": 5}, JSON, False),
        ({"text": None}, JSON, False),
        ({"text": ["a list"]}, JSON, False),
        ({"texts": "not a list"}, JSON, False),
        ({"texts": ["fine", 3]}, JSON, False),
        ({"text": "a", "texts": ["b"]}, JSON, False),
        ({}, JSON, False),
        (["a list body"], JSON, False),
        ("a JSON string", JSON, False),
        (b"42", JSON, False),
        (b"null", JSON, False),
        (b"{not json", JSON, False),
        (b"\xff\xfe bad utf-8", TEXT, False),
        (b"\xff\xfe bad utf-8", JSON, False),
        (b"\xc3\x28 sniffed", {}, False),
        (b'{"text": "\\ud800 lone surrogate"}', JSON, False),
        ({"text": "x" * 8193}, JSON, False),
        ({"text": "\u00e9" * 4097}, JSON, False),
        (("y" * 8193).encode(), TEXT, False),
        ({"texts": ["fine", "z" * 8193]}, JSON, False),
        (b"\x89PNG\r\n\x1a\n", {"Content-Type": "image/png"}, False),
        (b"text=hello", {"Content-Type": "application/x-www-form-urlencoded"}, False),
        ({"text": "fine"}, {"Content-Type": "application/json", "Content-Encoding": "gzip"}, False),
        (None, JSON, False),
        ({"text": ""}, JSON, True),
        ({"texts": ["fine"] * 17}, JSON, True),
        ({"text": 5}, JSON, True),
        ({"text": "fine"}, JSON, False),
    ]
    batches += [bad[i : i + BATCH] for i in range(0, len(bad), BATCH)]
    return batches


def record(result: Any) -> dict:
    """A Reply or a RequestError as plain data, bytes and floats exactly."""
    if hasattr(result, "body"):
        body = result.body if isinstance(result.body, bytes) else str(result.body).encode()
        return {
            "reply": base64.b64encode(body).decode(),
            "content_type": result.content_type,
            "headers": dict(result.headers),
        }
    return {
        "error": type(result).__name__,
        "status": result.status,
        "kind": getattr(result, "kind", None),
        "reason": result.reason,
        "retry_after_s": getattr(result, "retry_after_s", None),
    }


def served_config() -> dict:
    """sentiment's model-config.yaml `handler:` block (this checkout's: its served limits)."""
    import yaml

    config = yaml.safe_load((HERE.parents[1] / "handlers/sentiment/model-config.yaml").read_text())
    return dict(config["handler"])


def body_of(body: Any, i: int) -> Any:
    """JSON as the client's bytes, every third as a server's parsed JSON; bytes and None as sent."""
    if body is None or isinstance(body, bytes):
        return body
    return body if i % 3 == 2 else json.dumps(body).encode()


def answers(artifacts: str | Path) -> list[list[dict]]:
    from handlers.service import ModelService, Request

    out = []
    for config in CONFIGS:
        service = ModelService.from_dir(artifacts, config=served_config() | config)
        for n, batch in enumerate(requests()):
            service.explain_share.spans.clear()  # explanations' share: never the limit here
            reqs = [
                Request(
                    body_of(body, i),
                    headers | ({"explain": "True"} if explain else {}),
                    f"r{n}-{i}",
                )
                for i, (body, headers, explain) in enumerate(batch)
            ]
            out.append([record(r) for r in service.handle_batch(reqs)])
    return out


if __name__ == "__main__":
    Path(sys.argv[2]).write_text(json.dumps(answers(sys.argv[1])))
