"""This model's options for `python -m clients` (the hooks tools/registry.py describes).

python -m clients predict digits --image seven.png                    # base64 in JSON, REST or gRPC
python -m clients predict digits --image a.png --image b.jpg          # a batch request: a list back
python -m clients predict digits --image seven.png --upload           # the file itself as the body
python -m clients predict digits --grid '[[0,0,5,13,9,1,0,0], ...]'   # 8x8 grey levels 0..16
python -m clients predict digits --grid digit.json --protocol grpc    # the grid from a JSON file
python -m clients explain digits --image seven.png --png why.png      # which pixels made it a 7
"""

from __future__ import annotations

import argparse
import base64
import json
from pathlib import Path

from clients.client import decode_answer
from tools.plugin import Cli


def arguments(group: argparse._ArgumentGroup) -> None:
    """`predict` options."""
    group.add_argument(
        "--image",
        action="append",
        type=Path,
        metavar="FILE",
        help="a PNG, JPEG or WebP file; repeat for a batch request",
    )
    group.add_argument(
        "--grid",
        action="append",
        metavar="JSON",
        help="an image as rows of grey levels (0..16), inline JSON or a JSON file; repeatable",
    )
    group.add_argument(
        "--upload",
        action="store_true",
        help="digits: send the one --image file as the request body (its own content type)",
    )


def _grid(value: str) -> list:
    text = value if value.lstrip().startswith("[") else Path(value).read_text()
    try:
        grid = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"--grid is not JSON: {e}") from None
    if isinstance(grid, dict) and "image" in grid:  # a saved request body
        grid = grid["image"]
    return grid


def request(args: argparse.Namespace) -> dict | None:
    """The JSON body `predict` sends, or None when none of this model's options was given:
    every --image as base64 and every --grid, in that order; one image is {"image": ...}."""
    if not args.image and not args.grid:
        return None
    images: list = [base64.b64encode(p.read_bytes()).decode("ascii") for p in args.image or ()]
    images += [_grid(g) for g in args.grid or ()]
    return {"image": images[0]} if len(images) == 1 else {"images": images}


MEDIA_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".webp": "image/webp",
}


def predict(client, args: argparse.Namespace, payload: dict | str) -> dict | list | None:
    """The answer of an --upload call (the file's bytes as the body), else None."""
    if not args.upload:
        return None
    if len(args.image or ()) != 1 or args.grid:
        raise ValueError("--upload sends one file: give exactly one --image and no --grid")
    path = args.image[0]
    data = path.read_bytes()
    kind = MEDIA_TYPES.get(path.suffix.lower())
    if client.protocol == "rest" and kind is not None:
        response = client.post(args.model, data, {"Content-Type": kind}, version=args.version)
        return decode_answer(response.content)
    # gRPC carries bytes as they are, and the server sniffs the format from the file's signature.
    return client.predict(args.model, data, version=args.version)


def view(client, args: argparse.Namespace, payload, answer, path):
    """`explain --png`: the (first) image beside its attribution heat map."""
    import io

    import numpy as np
    from PIL import Image

    from tools.digits.explain_view import render_png

    if args.html:
        raise ValueError("digits explanations are images: use --png")
    first = answer[0] if isinstance(answer, list) else answer
    h, w = first["shape"]
    image = payload.get("image") if isinstance(payload, dict) else None
    if image is None and isinstance(payload, dict):
        image = payload["images"][0]
    if isinstance(image, str):  # base64 of an image file
        im = Image.open(io.BytesIO(base64.b64decode(image))).convert("L")
        grey = np.asarray(im.resize((w, h)), dtype=np.float32) / 255.0
    else:
        grey = np.asarray(image, dtype=np.float32) / 16.0
    return render_png(grey, first, path)


CLI = Cli(arguments=arguments, request=request, predict=predict, view=view)
"""This model's `python -m clients` parts (tools/plugin.py)."""
