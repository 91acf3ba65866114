"""Split / stitch with a Hann taper, and the stitched output against the model's own windows."""

import numpy as np
import pytest

from handlers.frequency.engine import FrequencyEngine
from handlers.frequency.family import SERVED, draw
from handlers.frequency.lockin import read_windows
from handlers.frequency.settings import parse_settings
from handlers.kits.signal.codec import SignalRequest
from handlers.kits.signal.windowing import num_windows, split, stitch, taper
from handlers.manifest import read_manifest
from training.frequency.config import CONFIGS


def test_split_covers_the_signal_with_overlapping_windows():
    x = np.arange(230, dtype=np.float32)
    w = split(x, 100, 50)
    assert w.shape == (num_windows(230, 100, 50), 100) == (4, 100)
    np.testing.assert_array_equal(w[1, :50], w[0, 50:])
    np.testing.assert_array_equal(w[-1, 80:], 0)  # tail zero-padded


def test_short_signal_is_padded_to_one_window():
    w = split(np.ones(7, dtype=np.float32), 50, 25)
    assert w.shape == (1, 50) and w[0, :7].sum() == 7 and w[0, 7:].sum() == 0
    assert stitch(w, 7, 25).shape == (7,)


@pytest.mark.parametrize(
    "length,window,hop", [(1000, 100, 50), (1234, 100, 25), (99, 50, 50), (1, 10, 5)]
)
def test_stitching_the_windows_of_a_signal_gives_it_back(length, window, hop):
    x = np.random.default_rng(0).normal(size=length).astype(np.float32)
    np.testing.assert_allclose(stitch(split(x, window, hop), length, hop), x, atol=1e-6)


def test_stitch_blends_disagreeing_windows_without_a_seam():
    # Each window predicts a different constant: a hard switch would jump by 1 at every boundary.
    # At the served window (the default model's) the blend must spread that jump out.
    n = 11
    window = CONFIGS["default"].window
    hop = window // 2
    pieces = np.repeat(np.arange(n, dtype=np.float32)[:, None], window, axis=1)
    out = stitch(pieces, (n - 1) * hop + window, hop)
    assert np.abs(np.diff(out[hop:-hop])).max() < 0.1
    assert taper(window)[0] < 0.01 and taper(window)[-1] < 0.01


def test_taper_trusts_the_window_that_has_read_more_of_the_signal():
    # Where windows k and k+1 overlap, k is at position p and k+1 at p - hop: k has read more.
    window, hop = 100, 50
    w = taper(window)
    assert np.argmax(w) > window // 2 and w[window // 2 :].sum() > 2 * w[: window // 2].sum()
    p = np.arange(hop, hop + hop // 2)  # the first half of the overlap (plain Hann: 1 to 0.5)
    assert (w[p] / (w[p] + w[p - hop])).min() > 0.9
    np.testing.assert_allclose(taper(window, skew=1.0), taper(window, skew=1.0)[::-1])


def test_stitched_10s_output_is_as_good_as_the_models_own_windows(frequency_artifacts):
    """The issue's criterion: MSE(stitched) <= 1.1 x MSE(per-window predictions) over 10 s of a
    served-family signal, against its truth."""
    manifest = read_manifest(frequency_artifacts)
    settings = parse_settings(manifest, {"runtime": "onnx"})
    engine = FrequencyEngine(settings, frequency_artifacts)
    mixed, truth = draw(np.random.default_rng(2), 10_000, SERVED)
    n = mixed.shape[0]
    sel = tuple(range(len(settings.frequencies)))
    stitched = engine.windows([SignalRequest(mixed, 1000, settings.frequencies, sel)])[0].signal

    # The model's own answers: non-overlapping windows, each read from its own first sample.
    windows = mixed.astype(np.float64).reshape(-1, settings.window)
    lengths = np.full(windows.shape[0], settings.window)
    per_window = []
    for s in sel:
        out, _ = read_windows(windows, lengths, [s] * windows.shape[0], settings.frequencies,
                              settings.sample_rate, settings.block, engine._run_sequence,
                              engine.head_weight, engine.head.dropout)  # fmt: skip
        per_window.append(out.reshape(n))
    mse_window = float(np.mean((np.stack(per_window) - truth) ** 2))
    mse_stitched = float(np.mean((stitched - truth) ** 2))
    print(
        f"MSE stitched {mse_stitched:.4f} vs per-window {mse_window:.4f}: ratio {mse_stitched / mse_window:.3f}"
    )
    assert mse_stitched <= 1.1 * mse_window


def test_trailing_axes_stitch_as_each_series_alone():
    """The handler stitches a request's components and bands in one pass; every sample must be
    bitwise what stitching that series alone gives (answers independent of what rides along)."""
    rng = np.random.default_rng(3)
    window, hop, length = 40, 20, 137
    n = num_windows(length, window, hop)
    pieces = rng.standard_normal((n, window, 3, 2)).astype(np.float32)
    together = stitch(pieces, length, hop)
    assert together.shape == (length, 3, 2)
    for f in range(3):
        for k in range(2):
            assert np.array_equal(together[:, f, k], stitch(pieces[:, :, f, k], length, hop))
