"""Explanations are seen, not only read: the sentiment page rendered by a real headless Chromium
shows each word shaded by its attribution (green toward the target, red away), and the frequency
PNG draws the signal, the component and the attribution."""

import shutil
import subprocess
from pathlib import Path

import numpy as np
from PIL import Image

from tools.frequency.explain_view import render_png
from tools.sentiment.explain_view import AWAY, TOWARD, render_html

TEXT = "A <b>warm</b> film, but the ending was dull & slow."


def explanation(text: str) -> dict:
    words = [
        {"text": "warm", "attribution": 0.9},
        {"text": "dull", "attribution": -0.7},
        {"text": "film", "attribution": 0.05},
    ]
    out = []
    for w in words:
        start = text.index(w["text"])
        out.append(w | {"start": start, "end": start + len(w["text"])})
    out.sort(key=lambda w: w["start"])
    return {"target": "positive", "probability": 0.8, "words": out, "method": "ablation",
            "evaluations": 4, "model": {"name": "sentiment", "version": "t"}}  # fmt: skip


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "chromium is missing: `make haproxy` installs the system tools (Debian: chromium)"
    return exe


def browse(page: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", *args, page.as_uri()]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)


def test_sentiment_page_in_a_real_browser(tmp_path):
    page = tmp_path / "why.html"
    page.write_text(render_html(TEXT, explanation(TEXT)))
    dom = browse(page, "--dump-dom").stdout
    # The text survives as text (escaped markup), each word is its own shaded span.
    assert "&lt;b&gt;" in dom and "<b>" not in dom and "&amp; slow" in dom
    assert dom.count('class="w"') == 3 and 'id="target">positive<' in dom
    shot = tmp_path / "why.png"
    browse(page, f"--screenshot={shot}", "--window-size=900,700")
    pixels = np.asarray(Image.open(shot).convert("RGB")).reshape(-1, 3).astype(int)

    def near(rgb, tol=30):
        return int((np.abs(pixels - np.array(rgb)).max(axis=1) < tol).sum())

    # "warm" (the strongest, full shade) is painted green, "dull" red at 0.7/0.9 strength.
    assert near(TOWARD) > 200
    red = tuple(int(255 - (255 - c) * 0.7 / 0.9) for c in AWAY)
    assert near(red) > 200


def test_frequency_png_has_the_signal_component_and_attribution(tmp_path):
    n, rate = 400, 100.0
    t = np.arange(n) / rate
    signal = np.sin(2 * np.pi * t) + 0.1 * np.sin(2 * np.pi * 7 * t)
    prediction = {"components": [{"frequency": 1.0, "signal": np.sin(2 * np.pi * t).tolist()}]}
    attr = np.where(t < 2, 0.01, -0.005)[None]
    path = render_png(signal, rate, prediction, {"frequencies": [1.0], "attributions": attr,
                      "method": "occlusion"}, tmp_path / "f.png")  # fmt: skip
    img = np.asarray(Image.open(path).convert("RGB")).reshape(-1, 3).astype(int)
    assert img.shape[0] > 100_000
    green = ((img[:, 1] > 100) & (img[:, 0] < 80) & (img[:, 2] < 80)).sum()
    red = ((img[:, 0] > 180) & (img[:, 1] < 80) & (img[:, 2] < 80)).sum()
    assert green > 500 and red > 500
