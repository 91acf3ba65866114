"""Every answer and refusal the digits model gives to a fixed set of requests, recorded to the bit:
the held-out 297 digits (JSON grids, alone and many to a request), uploads (PNG, JPEG, WebP; grey,
RGB and with alpha; bright-on-dark and dark-on-light; raw bodies, sniffed bodies and base64 in
JSON; large enough to be shrunk while decoding), grids of other sizes, explanations, batches past
the image budget and the decoding guard, and bad inputs of every kind the codec refuses.

Run by tests/unit/test_digits_answers.py twice: in process over this checkout's handlers/, and
as a script (`python tests/support/digits_answers.py ARTIFACTS OUT.json [RUNTIME]`) with PYTHONPATH naming
another checkout's handlers/ (the code at a fixed commit, read with `git archive`). It imports
nothing but `handlers.service` of whichever code is on the path, numpy, Pillow and scikit-learn.
"""

from __future__ import annotations

import base64
import io
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

CONFIG = {"runtime": "onnx", "threads": 1}
"""The served runtime on one thread: both sides run the same graph the same way."""
JSON = {"Content-Type": "application/json"}
BATCH = 8
"""TorchServe's batchSize for digits (model-config.yaml)."""


def held_out() -> np.ndarray:
    """The test split: load_digits' last 297 images, values 0..16 (training/digits/data.py)."""
    from sklearn.datasets import load_digits

    return load_digits().images[1500:]


def encoded(im: Image.Image, fmt: str, **save: Any) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **save)
    return buf.getvalue()


def picture(
    grid: np.ndarray, side: int, dark_on_light: bool = False, mode: str = "L"
) -> Image.Image:
    """A held-out digit drawn at `side` pixels: bright on dark as the dataset, or inverted."""
    grey = (grid / 16.0 * 255).astype(np.uint8)
    if dark_on_light:
        grey = 255 - grey
    im = Image.fromarray(grey).resize((side, side), Image.Resampling.BILINEAR)
    return im.convert(mode)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def requests(digits: np.ndarray) -> list[list[tuple[Any, dict, bool]]]:
    """Batches of (body, headers, explain)."""
    grids = [d.astype(int).tolist() for d in digits]
    batches: list[list[tuple[Any, dict, bool]]] = []
    # The held-out digits: most one to a request, batched 8 at a time; some many to a request.
    singles = [({"image": g}, JSON, False) for g in grids[:200]]
    batches += [singles[i : i + BATCH] for i in range(0, len(singles), BATCH)]
    batches.append(
        [({"images": grids[200 + 16 * i : 216 + 16 * i]}, JSON, False) for i in range(6)]
    )
    batches.append(
        [
            ({"images": grids[296:297]}, JSON, False),
            ({"image": [[v / 2 for v in row] for row in grids[3]]}, JSON, False),
        ]
    )
    # Uploads: formats, modes, both polarities, raw / sniffed / base64, sizes past the shrink.
    uploads: list[tuple[Any, dict, bool]] = []
    for i, (fmt, ctype, side, dark, mode) in enumerate(
        [
            ("PNG", "image/png", 8, False, "L"),
            ("PNG", "image/png", 64, True, "L"),
            ("PNG", "image/png", 200, False, "RGB"),
            ("PNG", "image/png", 512, True, "RGBA"),
            ("JPEG", "image/jpeg", 64, False, "L"),
            ("JPEG", "image/jpeg", 300, True, "RGB"),
            ("JPEG", "image/jpeg", 700, False, "RGB"),
            ("WEBP", "image/webp", 96, True, "RGB"),
            ("WEBP", "image/webp", 400, False, "RGB"),
            ("PNG", "image/png", 33, True, "P"),
            ("PNG", "image/png", 48, False, "LA"),
        ]
    ):
        save = {"quality": 90} if fmt in ("JPEG", "WEBP") else {}
        data = encoded(picture(digits[7 * i], side, dark, mode), fmt, **save)
        uploads.append((data, {"Content-Type": ctype}, False))
        uploads.append((data, {"Content-Type": "application/octet-stream"}, False))
        uploads.append(({"image": b64(data)}, JSON, False))
    batches += [uploads[i : i + BATCH] for i in range(0, len(uploads), BATCH)]
    wide = encoded(
        Image.fromarray(
            np.pad((digits[5] * 15).astype(np.uint8), ((4, 4), (40, 40)), constant_values=0)
        ).resize((320, 64)),
        "PNG",
    )
    blank = encoded(Image.new("L", (64, 64), 250), "PNG")
    twice = np.kron(digits[11], np.ones((2, 2))).astype(int).tolist()  # a 16 x 16 grid
    mixed = {"images": [grids[9], b64(uploads[3][0]), twice]}
    batches.append(
        [
            (wide, {"Content-Type": "image/png"}, False),
            (blank, {"Content-Type": "image/png"}, False),
            (mixed, JSON, False),
        ]
    )
    # Explanations (leave-one-pixel-out), beside a prediction.
    batches.append(
        [
            ({"image": grids[0]}, JSON, True),
            ({"image": grids[1]}, JSON, False),
            (uploads[4][0], {"Content-Type": "image/png"}, True),
            ({"images": grids[2:4]}, JSON, True),
        ]
    )
    # Past the batch's image budget (256): 503 + Retry-After for the requests after it.
    batches.append([({"images": grids[:64]}, JSON, False)] * 5)
    # Past the decoding guard (64 MiB): 4 x a 210-byte 2000 x 2000 colour WebP each.
    webp = b64(encoded(Image.new("RGB", (2000, 2000), (200, 200, 200)), "WEBP", lossless=True))
    batches.append(
        [
            ({"images": [webp] * 4}, JSON, False),
            ({"images": [webp] * 4}, JSON, False),
            ({"image": grids[5]}, JSON, False),
        ]
    )
    # Bad inputs.
    png = uploads[0][0]
    noise = encoded(
        Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64), np.uint8)), "PNG"
    )
    frames = [Image.new("L", (16, 16), c) for c in (0, 255)]
    anim = io.BytesIO()
    frames[0].save(anim, "PNG", save_all=True, append_images=frames[1:])
    bad: list[tuple[Any, dict, bool]] = [
        (b"", {"Content-Type": "image/png"}, False),
        (b"", JSON, False),
        (b"{not json", JSON, False),
        (b"\xff\xfe bad utf-8", JSON, False),
        ({"image": "not base64!"}, JSON, False),
        ({"image": b64(b"hello world")}, JSON, False),
        ({"image": [[1, 2], [3, 4]]}, JSON, False),
        ({"image": [[1] * 8] * 7 + [[1] * 7]}, JSON, False),
        ({"image": [[17] * 8] * 8}, JSON, False),
        ({"image": [[-1] * 8] * 8}, JSON, False),
        ({"image": [[True] * 8] * 8}, JSON, False),
        ({"image": [["1"] * 8] * 8}, JSON, False),
        ({"image": [[1] * 65] * 65}, JSON, False),
        ({"image": 5}, JSON, False),
        ({"images": []}, JSON, False),
        ({"images": [grids[0]] * 65}, JSON, False),
        ({"image": grids[0], "images": [grids[0]]}, JSON, False),
        ({}, JSON, False),
        ([grids[0]], JSON, False),
        (b'{"image": [[1e999, 0, 0, 0, 0, 0, 0, 0]]}', JSON, False),
        (noise[: len(noise) // 2], {"Content-Type": "image/png"}, False),
        (png[:20], {"Content-Type": "image/png"}, False),
        (encoded(Image.new("L", (4, 4)), "PNG"), {"Content-Type": "image/png"}, False),
        (encoded(Image.new("L", (4000, 1001)), "PNG"), {"Content-Type": "image/png"}, False),
        (b"GIF89a" + b"\0" * 20, {"Content-Type": "application/octet-stream"}, False),
        (encoded(Image.new("L", (16, 16)), "GIF"), {"Content-Type": "image/gif"}, False),
        (
            encoded(Image.new("L", (16, 16)), "BMP"),
            {"Content-Type": "application/octet-stream"},
            False,
        ),
        (encoded(Image.new("CMYK", (16, 16)), "JPEG"), {"Content-Type": "image/jpeg"}, False),
        (encoded(Image.new("I;16", (16, 16)), "PNG"), {"Content-Type": "image/png"}, False),
        (anim.getvalue(), {"Content-Type": "image/png"}, False),
        (png, {"Content-Type": "image/jpeg"}, False),
        (b"x" * (1 << 20 | 1), {"Content-Type": "image/png"}, False),
        ({"image": "A" * ((1 << 20) * 4 // 3 + 12)}, JSON, False),
        ({"images": [webp] * 5}, JSON, False),
        (b"some text", {"Content-Type": "text/plain"}, False),
        (
            {"image": [[0] * 8] * 8},
            {"Content-Type": "application/json", "Content-Encoding": "br"},
            False,
        ),
        ({"image": "not base64!"}, JSON, True),
        ({"images": [grids[0]] * 64}, JSON, True),
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


def answers(artifacts: str | Path, runtime: str = "onnx") -> list[list[dict]]:
    from handlers.service import ModelService, Request

    service = ModelService.from_dir(artifacts, config=CONFIG | {"runtime": runtime})
    out = []
    for n, batch in enumerate(requests(held_out())):
        service.explain_share.spans.clear()  # explanations' share of the worker: never the limit
        reqs = [
            Request(
                body if isinstance(body, bytes) or i % 3 == 2 else json.dumps(body).encode(),
                headers | ({"explain": "True"} if explain else {}),
                f"r{n}-{i}",
            )
            for i, (body, headers, explain) in enumerate(batch)
        ]  # JSON as the client's bytes, every third as a server's parsed JSON
        out.append([record(r) for r in service.handle_batch(reqs)])
    return out


if __name__ == "__main__":
    Path(sys.argv[2]).write_text(json.dumps(answers(*sys.argv[1:2], *sys.argv[3:4])))
