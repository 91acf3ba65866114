"""The text kit's wire contract from the client's side: a request's body (`request_json`), its
answer read back (`decode_answer` → `TextAnswer`) and an explanation's answer as a page
(`render_html`). The server's side is handlers/kits/text/codec.py.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass


def request_json(texts: str | Sequence[str]) -> dict:
    """One text → {"text"} (one answer); a sequence → {"texts"} (a list, even of one)."""
    if isinstance(texts, str):
        return {"text": texts}
    return {"texts": list(texts)}


@dataclass(frozen=True)
class TextAnswer:
    label: str
    probabilities: dict[str, float]
    uncertainty: dict
    truncated: bool
    model: dict


def decode_answer(body: dict | list) -> list[TextAnswer]:
    """A parsed answer → one TextAnswer per text (a one-text request gives a list of one)."""
    items = body if isinstance(body, list) else [body]
    return [
        TextAnswer(
            a["label"],
            dict(a["probabilities"]),
            dict(a.get("uncertainty") or {}),
            bool(a.get("truncated", False)),
            dict(a.get("model") or {}),
        )  # fmt: skip
        for a in items
    ]


# --- an explanation as a page ------------------------------------------------------------
# The request's text with each word shaded by its attribution (green toward the explained label,
# red away from it), the strongest words listed below: `python -m clients explain sentiment
# --html out.html` writes one (tools/sentiment/explain_view.py).

TOWARD = (22, 163, 74)
"""RGB of a word pushing toward the target label (shade scales with |attribution|)."""
AWAY = (220, 38, 38)


def _shade(value: float, scale: float) -> str:
    rgb = TOWARD if value > 0 else AWAY
    alpha = 0.0 if scale <= 0 else min(1.0, abs(value) / scale)
    return f"rgba({rgb[0]}, {rgb[1]}, {rgb[2]}, {alpha:.3f})"


def render_html(text: str, explanation: dict, top: int = 8) -> str:
    """One explanation (the JSON answer of POST /explanations/<text model>) over its text."""
    words = explanation["words"]
    scale = max((abs(w["attribution"]) for w in words), default=0.0)
    parts, last = [], 0
    for i, w in enumerate(words):
        parts.append(html.escape(text[last : w["start"]]))
        a = w["attribution"]
        parts.append(
            f'<span class="w" id="w{i}" data-attribution="{a:.6g}" title="{a:+.4f}" '
            f'style="background:{_shade(a, scale)}">{html.escape(text[w["start"] : w["end"]])}</span>'
        )
        last = w["end"]
    parts.append(html.escape(text[last:]))
    strongest = sorted(words, key=lambda w: -abs(w["attribution"]))[:top]
    rows = "".join(
        f"<tr><td>{html.escape(w['text'])}</td><td>{w['attribution']:+.4f}</td></tr>"
        for w in strongest
    )
    model = explanation.get("model") or {}
    target = html.escape(str(explanation["target"]))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>Why {target}? ({html.escape(str(model.get("name", "text model")))})</title>
<style>
body {{ font-family: sans-serif; max-width: 48rem; margin: 2rem auto; line-height: 1.8; }}
.w {{ border-radius: 3px; padding: 0 1px; }}
table {{ border-collapse: collapse; }} td {{ padding: 2px 12px; border-bottom: 1px solid #ddd; }}
.legend span {{ padding: 0 6px; }}
</style></head><body>
<h1>Why <em id="target">{target}</em>?</h1>
<p>Probability {explanation.get("probability", float("nan")):.3f}; method
{html.escape(str(explanation.get("method", "")))}, {explanation.get("evaluations", "?")} model passes;
model {html.escape(str(model.get("name", "")))} {html.escape(str(model.get("version", "")))}.</p>
<p class="legend"><span style="background:{_shade(1, 1)}">toward {target}</span>
<span style="background:{_shade(-1, 1)}">away from {target}</span></p>
<p id="text">{"".join(parts)}</p>
<h2>Strongest words</h2>
<table id="strongest"><tr><th>word</th><th>attribution</th></tr>{rows}</table>
</body></html>
"""
