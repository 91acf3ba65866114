"""Training batches: stream rows read consecutive windows and carry their state; fresh windows
ramp their loss in."""

import dataclasses

import numpy as np
import torch

from training.frequency.config import CONFIGS, SignalSpec
from training.frequency.data import make_signal
from training.frequency.train import Streams, loss_weights


def test_stream_rows_read_consecutive_windows_and_keep_their_state():
    sig = make_signal(SignalSpec(duration_s=1.0), seed=0)
    streams = Streams([sig], rows=3, window=50, hidden=4, layers=2, rng=np.random.default_rng(0))
    x1, y1 = streams.next()
    state = torch.full((2, 3, 4), 0.5)
    streams.keep(state, state)
    x2, y2 = streams.next()
    for r in range(3):
        if torch.all(streams.h[:, r] == 0):  # this row restarted at the signal's end
            continue
        start = int(np.flatnonzero(sig.mixed == x1[r, 0, 0])[0])
        np.testing.assert_array_equal(x2[r, :, 0], sig.mixed[start + 50 : start + 100])
        np.testing.assert_array_equal(
            y2[r], sig.targets[int(streams.sel[r]), start + 50 : start + 100]
        )
        np.testing.assert_array_equal(x2[r, :, 1:], x1[r, :, 1:])  # same frequency all along
        assert torch.all(streams.h[:, r] == 0.5)


def test_stream_that_reaches_the_signal_end_restarts_from_a_zero_state():
    sig = make_signal(SignalSpec(duration_s=0.2), seed=0)  # 200 samples: 4 windows of 50 at most
    streams = Streams([sig], rows=1, window=50, hidden=4, layers=1, rng=np.random.default_rng(1))
    restarted = False
    for _ in range(6):
        streams.keep(torch.ones(1, 1, 4), torch.ones(1, 1, 4))
        before = int(streams.pos[0])
        streams.next()
        if before + 50 > 200:
            restarted = True
            assert torch.all(streams.h == 0) and torch.all(streams.c == 0)
            assert int(streams.pos[0]) < 100  # a fresh start in the first window plus one read
    assert restarted


def test_zero_state_window_loss_ramps_in_over_the_burn_in():
    cfg = dataclasses.replace(CONFIGS["default"], window=100, burn_in=20)
    w = loss_weights(cfg).numpy()
    assert w.shape == (100,) and w[0] == np.float32(1 / 20) and np.all(w[19:] == 1.0)
    assert np.all(np.diff(w) >= 0)
    assert np.all(loss_weights(dataclasses.replace(cfg, burn_in=1)).numpy() == 1.0)
