"""Synthetic signal generation: ranges, structure, and seed behaviour."""

import numpy as np
import pytest

from handlers.frequency.family import TRAINING, draw_parts
from handlers.frequency.lockin import (
    Carried,
    block_features,
    block_means,
    reference,
    stream_chunk,
)
from training.frequency.config import SignalSpec
from training.frequency.data import draw_many, make_signal, rows

SPEC = SignalSpec(duration_s=10.0)


def test_signal_has_ten_seconds_at_1khz_and_four_clean_targets():
    s = make_signal(SPEC, seed=1)
    assert s.mixed.shape == (10_000,) and s.targets.shape == (4, 10_000)
    t = np.arange(10_000) / 1000
    for i, f in enumerate((1, 3, 5, 7)):
        np.testing.assert_allclose(s.targets[i], np.sin(2 * np.pi * f * t), atol=1e-6)


def test_mix_is_mean_of_perturbed_sinusoids_within_amplitude_bounds():
    s = make_signal(SPEC, seed=1)
    assert np.abs(s.mixed).max() <= 1.2 + 1e-6  # a mean of four terms each within +-1.2
    assert np.corrcoef(s.mixed, s.targets.mean(axis=0))[0, 1] > 0.9


def test_amplitude_noise_is_uniform_0p8_to_1p2_per_sample():
    # Without phase noise, mixed - clean mean = mean_i (A_i - 1) sin_i: zero mean and
    # variance Var(A)/16 * sum_i sin_i^2, with Var(U[0.8, 1.2]) = 0.4^2 / 12.
    s = make_signal(SignalSpec(phase_noise=0.0), seed=4)
    residual = s.mixed - s.targets.mean(axis=0)
    expected_var = 0.4**2 / 12 / 16 * (s.targets**2).sum(axis=0)
    assert abs(residual.mean()) < 0.003
    assert np.mean(residual**2) == pytest.approx(expected_var.mean(), rel=0.1)
    ratio = residual / np.sqrt(expected_var.clip(1e-3))
    assert np.abs(residual).max() <= 0.2 * np.abs(s.targets).sum(axis=0).max() / 4 + 1e-6
    assert 0.9 < ratio.std() < 1.1


def test_phase_noise_level_controls_the_residual():
    quiet = make_signal(SignalSpec(phase_noise=0.0), seed=3)
    noisy = make_signal(SignalSpec(phase_noise=0.5), seed=3)
    clean = quiet.targets.mean(axis=0)
    assert np.std(noisy.mixed - clean) > 2 * np.std(quiet.mixed - clean)


def test_seeds_reproduce_and_differ():
    a, b, c = make_signal(SPEC, 1), make_signal(SPEC, 1), make_signal(SPEC, 2)
    np.testing.assert_array_equal(a.mixed, b.mixed)
    assert np.abs(a.mixed - c.mixed).max() > 0.01
    np.testing.assert_array_equal(a.targets, c.targets)  # targets are noise-free


def test_block_features_read_a_components_iq_against_the_reference():
    """x = I sin + Q cos of the selected frequency: twice the block means of x sin and x cos,
    averaged over whole periods, are I and Q; the one-hot selector follows."""
    n, block, i_, q_ = 2000, 20, 0.7, -1.3
    sin, cos = reference(3.0, np.arange(n), 1000)
    x = i_ * sin + q_ * cos
    feats = block_features(np.stack([x * sin, x * cos], axis=-1)[None], [1], 4, block)
    assert feats.shape == (1, n // block, 6)
    np.testing.assert_allclose(feats[0, :, :2].mean(axis=0), [i_, q_], atol=1e-6)
    np.testing.assert_array_equal(feats[0, :, 2:], np.tile([0, 1, 0, 0], (n // block, 1)))


def test_training_rows_pair_inputs_with_the_selected_components_iq():
    rng = np.random.default_rng(0)
    drawn = draw_many(TRAINING, rng, 6, 400)
    sel = np.array([0, 1, 2, 3, 0, 1])
    x, y = rows(drawn, sel, (1.0, 3.0, 5.0, 7.0), 1000, 20)
    assert x.shape == (6, 20, 6) and y.shape == (6, 20, 2)
    for r in range(6):
        assert int(np.argmax(x[r, 0, 2:])) == sel[r]
        if not np.any(drawn.iq[r, sel[r]]):
            assert not np.any(y[r])  # absent: the target is zero
    # the truth is I sin + Q cos against the reference from the signal's first sample
    m, comps, iq = draw_parts(np.random.default_rng(1), 500, TRAINING)
    for f_i, hz in enumerate((1.0, 3.0, 5.0, 7.0)):
        sin, cos = reference(hz, np.arange(500), 1000)
        np.testing.assert_allclose(iq[f_i, 0] * sin + iq[f_i, 1] * cos, comps[f_i], atol=1e-5)


def test_a_stream_completes_blocks_across_chunk_edges():
    """Chunks of 7 and 33 samples give the blocks one 40-sample read gives, and the samples
    before a block completes are answered by the block before it."""
    x = np.random.default_rng(0).normal(size=40)
    sel = (0, 2)
    freqs = (1.0, 3.0, 5.0, 7.0)
    whole, _ = stream_chunk(x, Carried(0, 0.0, np.zeros((2, 2), np.float32)), sel, freqs, 1000, 20)
    first, prep = stream_chunk(x[:7], Carried(0, 0.0, np.zeros((2, 2), np.float32)), sel, freqs,
                               1000, 20)  # fmt: skip
    second, prep2 = stream_chunk(x[7:], prep[-1], sel, freqs, 1000, 20)
    assert whole.shape == (2, 2, 6) and first.shape == (2, 0, 6) and second.shape == (2, 2, 6)
    np.testing.assert_allclose(second, whole, atol=1e-6)
    np.testing.assert_array_equal(prep[3], np.zeros(7))  # all held from before the chunk
    np.testing.assert_array_equal(prep2[3], (7 + np.arange(33)) // 20)
    assert prep2[-1].seen == 40 and np.allclose(prep2[-1].acc, 0.0, atol=1e-6)


def test_window_inputs_read_each_rows_own_oscillator_to_the_bit():
    """window_inputs computes one oscillator row per distinct frequency and shares it: the sin and
    cos of every row are exactly those of the row's own reference from index 0."""
    from handlers.frequency.lockin import window_inputs

    rng = np.random.default_rng(3)
    windows = rng.normal(size=(24, 400)).astype(np.float32)
    lengths = rng.integers(1, 401, size=24)
    selectors = rng.integers(0, 4, size=24)
    freqs = (1.0, 3.0, 5.0, 7.0)
    _, _, sin, cos = window_inputs(windows, lengths, selectors, freqs, 1000, 20)
    for r, s in enumerate(selectors):
        want_sin, want_cos = reference(freqs[s], np.arange(400), 1000)
        assert np.array_equal(sin[r], want_sin) and np.array_equal(cos[r], want_cos)


def test_block_features_are_the_interleaved_mean_to_the_bit():
    """block_features sums I and Q apart, in the order numpy's mean takes over the block axis of
    the interleaved (R, N / block, block, 2) products: every feature bitwise that mean's, signed
    zeros and wide magnitudes included."""
    rng = np.random.default_rng(5)
    r, n, block = 7, 400, 20
    products = rng.normal(size=(r, n, 2)) * 10.0 ** rng.integers(-9, 9, size=(r, n, 2))
    products[0, :block] = -0.0  # a block of negative zeros: the mean's sum starts at +0.0
    products[1, :block, 0] = 0.0
    selectors = rng.integers(0, 4, size=r)
    means = products.reshape(r, n // block, block, 2).mean(axis=2) * 2.0
    for k in (0, 1):  # float64, before the float32 features round most differences away
        got_k = block_means(np.ascontiguousarray(products[..., k]), block)
        assert np.array_equal(got_k.view(np.int64), means[..., k].view(np.int64))
    want = np.concatenate(
        [
            means.astype(np.float32),
            np.eye(4, dtype=np.float32)[selectors][:, None, :].repeat(n // block, axis=1),
        ],
        axis=-1,
    )
    got = block_features(products, selectors, 4, block)
    assert got.dtype == np.float32 and got.shape == want.shape
    assert np.array_equal(got.view(np.int32), want.view(np.int32))


def test_window_inputs_of_shared_windows_are_each_rows_own():
    """A window read for several selectors (`source`) is scaled once: every row's inputs, scale
    and oscillators are bitwise those of the row given its own copy of the window."""
    from handlers.frequency.lockin import window_inputs

    rng = np.random.default_rng(4)
    windows = rng.normal(size=(5, 400))
    lengths = rng.integers(1, 401, size=5)
    for u, m in enumerate(lengths):
        windows[u, m:] = 0.0
    source = np.array([0, 0, 1, 2, 2, 2, 3, 4, 4])
    selectors = rng.integers(0, 4, size=source.shape[0])
    freqs = (1.0, 3.0, 5.0, 7.0)
    shared = window_inputs(windows, lengths, selectors, freqs, 1000, 20, source)
    alone = window_inputs(windows[source], lengths[source], selectors, freqs, 1000, 20)
    for a, b in zip(shared, alone, strict=True):
        assert (
            a.dtype == b.dtype
            and np.array_equal(a, b)
            and np.array_equal(np.signbit(a), np.signbit(b))
        )
