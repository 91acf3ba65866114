"""The served digits recipe on digits with something around them: a dark frame (5-9 % of the side),
a grey frame, a thin 2 % frame, a ruled line under the digit, a box around it, a perspective view;
and on images that are not one digit (two side by side, or none: a frame, a line or a box alone).

The images come from tests/support/drawn_digits.py's `condition_set` and `odd_scenes`, code and
seeds training never uses (training/digits/augment.py draws its own frames, boxes, lines and
perspective). The full-size model (tests/fixtures/digits.py: the one `make serve` trained from this
checkout, or trained here) is read through the in-process predictor, the served path.

Each condition is read right (>= 0.9) or, where it is not, wrong only without confidence (no error
at p >= 0.9). Before the reading looked for the strokes (polarity from the border's median, the
bounding box of all ink), a dark frame on a light card read as bright-on-dark, 0.10 right with 15
errors at p >= 0.9 on a generator like this one.
"""

from __future__ import annotations

import numpy as np
import pytest

from handlers.digits.predict import DigitsPredictor
from tests.support.drawn_digits import CONDITIONS, condition_set, odd_scenes

pytestmark = pytest.mark.slow

READ_RIGHT = 0.9
"""Per condition: at least this accuracy, or no error at p >= SURE."""
SURE = 0.9
CONFIG = {"runtime": "onnx", "threads": 1, "max_batch_images": 1024}


@pytest.fixture(scope="module")
def predictor(digits_default_artifacts):
    return DigitsPredictor.from_dir(digits_default_artifacts, CONFIG)


@pytest.fixture(scope="module")
def scored(predictor):
    scenes = condition_set()
    return scenes, predictor.classify([s.grey for s in scenes])


def condition_figures(scenes, answers) -> dict[str, dict]:
    """Per condition: images, accuracy, errors at p >= SURE, the polarity read right."""
    out = {}
    for condition in CONDITIONS:
        rows = [(s, a) for s, a in zip(scenes, answers, strict=True) if s.condition == condition]
        right = [int(a.label) == s.label for s, a in rows]
        sure_wrong = [
            (s.label, a.label, round(max(a.probabilities.values()), 3))
            for (s, a), ok in zip(rows, right, strict=True)
            if not ok and max(a.probabilities.values()) >= SURE
        ]
        out[condition] = {
            "images": len(rows),
            "accuracy": round(float(np.mean(right)), 3),
            "confident_errors": sure_wrong,
            "one_digit_found": sum(a.digits_found == 1 for _, a in rows),
        }
    return out


def test_each_condition_is_read_right_or_never_confidently_wrong(scored):
    figures = condition_figures(*scored)
    print({k: (v["accuracy"], len(v["confident_errors"])) for k, v in figures.items()})
    for condition, f in figures.items():
        assert f["images"] == 60
        assert f["accuracy"] >= READ_RIGHT or not f["confident_errors"], (condition, figures)


def test_frames_are_read_as_dark_ink_on_a_light_card(scored):
    scenes, answers = scored
    framed = [(s, a) for s, a in zip(scenes, answers, strict=True) if s.condition.endswith("frame")]
    assert len(framed) == 180
    assert all(a.polarity == "dark_on_light" for _, a in framed)
    assert all(a.digits_found == 1 for _, a in framed)


def test_two_digits_or_none_are_flagged(predictor):
    """`digits_found` says an image is not one digit: 2 for two side by side, 0 for a frame, a
    line or blank paper alone; where a lone box or line is taken for a digit, not confidently."""
    scenes = odd_scenes()
    answers = predictor.classify([s.grey for s in scenes])
    two = [a for s, a in zip(scenes, answers, strict=True) if s.digits == 2]
    none = [a for s, a in zip(scenes, answers, strict=True) if s.digits == 0]
    assert len(two) == len(none) == 20
    assert sum(a.digits_found >= 2 for a in two) >= 18, [a.digits_found for a in two]
    unflagged = [
        (a.digits_found, a.label, round(max(a.probabilities.values()), 3))
        for a in none
        if a.digits_found == 1 and max(a.probabilities.values()) >= SURE
    ]
    assert not unflagged, unflagged
