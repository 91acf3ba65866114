"""The served digits recipe on the digits people draw and type, in both polarities.

The default config (the model `make serve` trained from this very checkout when artifacts/digits
holds it, as in CI; else trained here, about 70 s of CPU on one thread: tests/fixtures/digits.py)
is read through the in-process predictor, the served path (polarity, levels and framing in
handlers/kits/image/reading.py).
The images come from tests/support/drawn_digits.py, a generator that training never uses: strokes
brushed from its own templates and digits typed in Pillow's bundled font, where training augments
scikit-learn's digits (training/digits/augment.py). The recipe was developed against that
generator's seed 2024; these tests draw with another seed (HELD_OUT_SEED).

These tests on the recipe before the reading and the augmentation: drawn digits 0.30 bright-on-dark
and 0.12 dark-on-light, typed 0.25 and 0.13, entropy AUROC of errors 0.60 (and no polarity in the
answer). With them (two trainings): drawn 0.99-1.00 in both polarities, typed 0.85-0.90, AUROC
0.996. With typeset digits in matplotlib's fonts in training as well (four trainings, torch seeds
0-3): drawn 0.99-1.00, typed 0.92-1.00, AUROC 0.974-0.989; the 297 test digits 0.9697-0.9832.
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from handlers.digits.predict import DigitsPredictor
from tests.support.drawn_digits import groups, held_out_set
from training.common.calibration import auroc
from training.digits.data import load_splits
from training.digits.probes import LETTERS, non_digits

pytestmark = pytest.mark.slow

HELD_OUT_SEED = 7
ACCURACY_FLOOR = {"drawn": 0.9, "typed": 0.9}
"""Per kind and polarity. Typed digits reached 0.85-0.90 before training saw typeset digits (the
font's 9 and 6, whose tail or hook nearly closes at 8 x 8, read as 0 or 8); with matplotlib's
bundled fonts in training (training/digits/glyphs.py) four trainings (torch seeds 0-3) reach
0.98 / 1.00, 0.97 / 0.92, 0.95 / 0.93 and 0.97 / 0.95 (bright on dark / dark on light)."""
CONFIG = {"runtime": "onnx", "threads": 1, "max_batch_images": 1024}


@pytest.fixture(scope="module")
def predictor(digits_default_artifacts):
    return DigitsPredictor.from_dir(digits_default_artifacts, CONFIG)


@pytest.fixture(scope="module")
def held_out():
    return held_out_set(per_digit=10, typed_per_digit=6, seed=HELD_OUT_SEED)


@pytest.fixture(scope="module")
def answers(predictor, held_out):
    return predictor.classify([s.grey for s in held_out])


def _correct(held_out, answers) -> np.ndarray:
    return np.array([int(a.label) == s.label for s, a in zip(held_out, answers, strict=True)])


def test_drawn_and_typed_digits_are_read_in_either_polarity(held_out, answers):
    correct = _correct(held_out, answers)
    accuracy = {}
    for kind, polarity, group in groups(held_out):
        mask = np.array([s.kind == kind and s.polarity == polarity for s in held_out])
        accuracy[(kind, polarity, len(group))] = round(float(correct[mask].mean()), 3)
    assert len(accuracy) == 4
    for (kind, polarity, n), value in accuracy.items():
        assert value >= ACCURACY_FLOOR[kind], (kind, polarity, n, accuracy)


def test_the_answer_says_which_polarity_was_read(held_out, answers):
    read = [a.polarity for a in answers]
    assert read == [s.polarity for s in held_out]


def test_entropy_ranks_errors_above_correct_answers(held_out, answers):
    wrong = ~_correct(held_out, answers)
    entropy = np.array([a.entropy for a in answers])
    assert wrong.any(), "no errors at all: nothing for the entropy to separate"
    assert auroc(entropy, wrong) >= 0.9


def test_held_out_dataset_digits_stay_above_097(predictor):
    test = load_splits()["test"]
    labels = [int(a.label) for a in predictor.classify(list(test.greys))]
    assert len(labels) == 297
    assert np.mean(np.array(labels) == test.labels) >= 0.97


def _large_non_digits(seed: int = 5) -> list[np.ndarray]:
    """Blank, solid, uniform and Gaussian noise, and letters, at 64 x 64 in both polarities."""
    rng = np.random.default_rng(seed)
    images = [np.zeros((64, 64)), np.ones((64, 64)), np.full((200, 200), 0.5)]
    images += [rng.uniform(0, 1, (64, 64)) for _ in range(10)]
    images += [np.clip(rng.normal(0.5, 0.2, (64, 64)), 0, 1) for _ in range(10)]
    font = ImageFont.load_default(size=48)
    for char in LETTERS:
        for paper in (0, 255):
            im = Image.new("L", (64, 64), paper)
            ImageDraw.Draw(im).text((32, 32), char, fill=255 - paper, font=font, anchor="mm")
            images.append(np.asarray(im) / 255.0)
    return [np.asarray(g, np.float32) for g in images]


def test_non_digits_stay_more_uncertain_than_dataset_digits(predictor):
    """As before the reading: blank, noise and letters (never trained on), at the dataset's 8 x 8
    and as large uploads, are told from the held-out dataset digits by their entropy."""
    digits = [a.entropy for a in predictor.classify(list(load_splits()["test"].greys))]
    small = [g for kind in non_digits().values() for g in kind]
    others = [a.entropy for a in predictor.classify(small + _large_non_digits())]
    scores = np.r_[digits, others]
    is_other = np.r_[np.zeros(len(digits), bool), np.ones(len(others), bool)]
    assert auroc(scores, is_other) >= 0.99
