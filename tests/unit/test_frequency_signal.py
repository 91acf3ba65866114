"""Synthetic signal generation: ranges, structure, and seed behaviour."""

import numpy as np
import pytest

from handlers.frequency.engine import model_inputs
from training.frequency.config import SignalSpec
from training.frequency.data import make_signal, sample_windows

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


def test_inputs_carry_sample_and_one_hot_selector():
    x = model_inputs(np.array([0.5, -0.25], dtype=np.float32), 2, 4)
    assert x.shape == (2, 5)
    np.testing.assert_array_equal(x[:, 0], [0.5, -0.25])
    np.testing.assert_array_equal(x[:, 1:], [[0, 0, 1, 0], [0, 0, 1, 0]])


def test_sampled_windows_pair_inputs_with_the_selected_target():
    s = make_signal(SignalSpec(duration_s=1.0), seed=0)
    x, y = sample_windows([s], 50, 8, np.random.default_rng(0))
    assert x.shape == (8, 50, 5) and y.shape == (8, 50)
    for b in range(8):
        sel = int(np.argmax(x[b, 0, 1:]))
        start = int(np.flatnonzero(s.mixed == x[b, 0, 0])[0])
        np.testing.assert_array_equal(y[b], s.targets[sel, start : start + 50])
