"""Training's typeset digit glyphs (training/digits/glyphs.py): drawn in the fonts matplotlib
bundles, never in the font of the held-out typed digits (Pillow's bundled Aileron,
tests/support/drawn_digits.py), seeded, and framed like the stroke glyphs."""

from __future__ import annotations

import numpy as np
from PIL import ImageFont

from training.digits.glyphs import FONT_FILES, font_faces, typeset_glyphs


def test_typeset_glyphs_never_use_the_held_out_font():
    held_out = ImageFont.load_default(size=32).getname()[0]
    assert held_out == "Aileron"  # what tests/support/drawn_digits.typed draws with
    families = {face.getname()[0] for face in font_faces()}
    assert len(font_faces()) == len(FONT_FILES)
    assert held_out not in families
    assert {"DejaVu Sans", "DejaVu Serif", "STIXGeneral"} <= families


def test_typeset_glyphs_are_seeded_labelled_and_framed():
    images, labels = typeset_glyphs(30, seed=3)
    again, _ = typeset_glyphs(30, seed=3)
    other, _ = typeset_glyphs(30, seed=4)
    assert list(labels) == [k % 10 for k in range(30)]
    arrays = [np.asarray(im) for im in images]
    assert all(np.array_equal(a, np.asarray(b)) for a, b in zip(arrays, again, strict=True))
    assert not all(np.array_equal(a, np.asarray(b)) for a, b in zip(arrays, other, strict=True))
    for a in arrays:
        assert a.shape == (32, 32) and a.dtype == np.float32
        rows = np.flatnonzero(a.max(axis=1) > 0.5)
        assert rows[0] >= 2 and rows[-1] <= 29  # the ink fills rows 2..30, as glyph()'s does
        assert a.max() > 0.9
