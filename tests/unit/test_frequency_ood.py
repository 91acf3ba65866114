"""The out-of-distribution flag (handlers/frequency/ood.py): judged on the input alone, its
threshold set by training on held-out served-family signals (training/frequency/ood.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from handlers.frequency.family import SERVED, draw
from handlers.frequency.ood import residual
from handlers.frequency.predict import judgement
from handlers.frequency.stationarity import window_samples
from handlers.kits.signal.predict import Components, Extraction
from training.frequency.config import CONFIGS
from training.frequency.data import make_signal
from training.frequency.ood import in_family, ood_threshold, residuals

CFG = CONFIGS["default"]
RATE, FREQS = CFG.signal.sample_rate, tuple(CFG.signal.frequencies)
TEST_SEED = 4242  # not the config's ood_seed, nor any training seed


@pytest.fixture(scope="module")
def threshold() -> float:
    return ood_threshold(CFG)


def judge(signal: np.ndarray, rate: int, freqs: tuple[float, ...], threshold: float | None):
    """(residual, out_of_distribution) as a one-shot answer gives them on the residual alone
    (FrequencyPredictor.judge with no stationarity thresholds)."""
    res = residual(signal, rate, freqs)
    j = judgement(None if res is None else round(res, 6), None, None, threshold, None, None)
    return j.residual, j.out_of_distribution


def test_family_draw_is_the_served_family():
    rng = np.random.default_rng(TEST_SEED)
    t = np.arange(2000) / 1000
    for _ in range(50):
        mixed, truth = draw(rng, 2000)
        assert mixed.dtype == np.float32 and mixed.shape == (2000,) and truth.shape == (4, 2000)
        present = np.abs(truth).max(axis=1) > 0
        assert 1 <= present.sum() <= 4
        for j in np.flatnonzero(present):
            # each present component is a sine at its own frequency, amplitude in [0.3, 2.0]
            amp = np.sqrt(2) * truth[j].std()
            assert 0.3 - 1e-3 <= amp <= 2.0 + 1e-3
            fit = np.linalg.lstsq(
                np.stack([np.sin(2 * np.pi * FREQS[j] * t), np.cos(2 * np.pi * FREQS[j] * t)], 1),
                truth[j],
                rcond=None,
            )
            assert fit[1][0] < 1e-6 * 2000
        noise = mixed - truth.sum(axis=0)
        assert 0.04 < noise.std() < 0.22
    assert SERVED.frequencies == FREQS and SERVED.sample_rate == RATE


def test_threshold_is_a_fraction_from_other_seeds(threshold):
    assert 0 < threshold < 1
    assert CFG.ood_seed != TEST_SEED and CFG.ood_signals >= 400


def test_in_family_signals_are_rarely_flagged(threshold):
    res = residuals(in_family(CFG, TEST_SEED, 400), RATE, FREQS)
    assert res.shape == (400,)
    assert float(np.mean(res > threshold)) <= 0.05


@pytest.mark.parametrize("seconds", [1.0, 1.5, 4.0])
def test_in_family_other_lengths_rarely_flagged(threshold, seconds):
    cfg = dataclasses.replace(CFG, ood_samples=int(seconds * RATE))
    res = residuals(in_family(cfg, TEST_SEED + 1, 400), RATE, FREQS)
    assert float(np.mean(res > threshold)) <= 0.05


def test_todays_training_generator_is_not_flagged(threshold):
    for seed in (CFG.train_seed, CFG.test_seed, CFG.val_seed, 77):
        mixed = make_signal(CFG.signal, seed).mixed
        for lo in range(0, mixed.shape[0] - 2000 + 1, 2000):
            res, flag = judge(mixed[lo : lo + 2000], RATE, FREQS, threshold)
            assert flag is False, (seed, lo, res)


def test_other_signals_are_flagged(threshold):
    rng = np.random.default_rng(TEST_SEED + 2)
    t = np.arange(2000) / RATE
    for _ in range(20):
        a, b = rng.uniform(0.3, 2.0, size=2)
        p, q = rng.uniform(0, 2 * np.pi, size=2)
        mix = a * np.sin(2 * np.pi * 2 * t + p) + b * np.sin(2 * np.pi * 11 * t + q)
        mix = mix + rng.normal(0, 0.1, t.shape)
        assert judge(mix, RATE, FREQS, threshold)[1] is True
        assert judge(rng.normal(0, rng.uniform(0.1, 3), 2000), RATE, FREQS, threshold)[1] is True


def test_too_short_or_silent_is_not_judged(threshold):
    n = window_samples(RATE, FREQS)
    assert n == 1000
    assert residual(np.ones(n - 1), RATE, FREQS) is None
    assert judge(np.zeros(2000), RATE, FREQS, threshold) == (None, None)
    assert residual(np.random.default_rng(0).normal(size=n), RATE, FREQS) is not None
    # no threshold (an export from before): the residual, no flag
    res, flag = judge(np.random.default_rng(0).normal(size=n), RATE, FREQS, None)
    assert res is not None and flag is None


def answer(*figures) -> Extraction:
    """A one-frequency answer of zeros with these judgement figures (flag, residual,
    nonstationarity, offset)."""
    flag, res, nonstationarity, offset = (*figures, None, None)[:4]
    sig = np.zeros((1, 3), np.float32)
    return Extraction((1.0,), Components(sig, sig), None, sample_rate=1000, model={"version": "v"},
                      residual=res, out_of_distribution=flag, nonstationarity=nonstationarity,
                      offset=offset)  # fmt: skip


def test_float32_answer_headers_decode_to_the_json_fields():
    from clients.kits.signal import decode_answer
    from handlers.kits.signal import codec

    for flag, res in ((True, 0.987654321), (False, 0.0123), (None, None)):
        data, headers = codec.answer_float32(answer(flag, res))
        got = decode_answer(data, headers)
        assert got.out_of_distribution is flag
        assert got.residual == (None if res is None else pytest.approx(res, rel=1e-5))
        body = codec.answer_json(answer(flag, res))
        assert body["out_of_distribution"] is flag and body["residual"] == res


def test_the_judgement_figures_reach_every_answer_form():
    """JSON, the float32 headers and the OIP outputs carry the same figures (None: absent)."""
    from clients.kits.signal import decode_answer
    from handlers.codec import Reply
    from handlers.kits.signal import codec
    from tests.support import wire

    figures = (True, 0.25, 0.125, 0.0625)  # flag, residual, nonstationarity, offset
    data, headers = codec.answer_float32(answer(*figures))
    assert headers["X-Nonstationarity"] == "0.125" and headers["X-Offset"] == "0.0625"
    got = decode_answer(data, headers)
    assert (got.out_of_distribution, got.residual, got.nonstationarity, got.offset) == figures
    body = codec.answer_json(answer(*figures))
    assert (body["nonstationarity"], body["offset"]) == (0.125, 0.0625)
    outputs = {o.name: o for o in wire.signal_answer(Reply(data, codec.FLOAT32, headers))}
    assert outputs["nonstationarity"].data.tolist() == [0.125]
    assert outputs["offset"].data.tolist() == [0.0625]
    data, headers = codec.answer_float32(answer(None, None))
    assert headers["X-Nonstationarity"] == "null" == headers["X-Offset"]
    outputs = {o.name: o for o in wire.signal_answer(Reply(data, codec.FLOAT32, headers))}
    assert "nonstationarity" not in outputs and "offset" not in outputs


def test_manifest_threshold_is_checked_and_may_be_absent():
    from handlers.errors import ArchiveError
    from handlers.frequency.settings import FrequencyExport
    from training.frequency.__main__ import handler_settings

    block = handler_settings(CONFIGS["tiny"]).to_block()
    assert 0 < block["ood_threshold"] < 1
    assert FrequencyExport.from_block(block).ood_threshold == block["ood_threshold"]
    old = {k: v for k, v in block.items() if k != "ood_threshold"}  # an export from before
    assert FrequencyExport.from_block(old).ood_threshold is None
    for bad in (0, 1.5, -0.1, "0.2", True):
        with pytest.raises(ArchiveError, match="ood_threshold"):
            FrequencyExport.from_block(block | {"ood_threshold": bad})
