"""Training batches: stream rows read consecutive windows and carry their state; fresh windows
ramp their loss in."""

import dataclasses

import numpy as np
import torch

from training.frequency.config import CONFIGS, SignalSpec
from training.frequency.data import make_signal
from training.frequency.train import Streams, loss_weights


def test_stream_rows_read_consecutive_windows():
    sig = make_signal(SignalSpec(duration_s=1.0), seed=0)
    streams = Streams([sig], rows=3, window=50, rng=np.random.default_rng(0))
    x1, y1, _ = streams.next()
    x2, y2, restarted = streams.next()
    for r in range(3):
        if restarted[r]:  # this row restarted at the signal's end
            continue
        start = int(np.flatnonzero(sig.mixed == x1[r, 0, 0])[0])
        np.testing.assert_array_equal(x2[r, :, 0], sig.mixed[start + 50 : start + 100])
        np.testing.assert_array_equal(
            y2[r], sig.targets[int(streams.sel[r]), start + 50 : start + 100]
        )
        np.testing.assert_array_equal(x2[r, :, 1:], x1[r, :, 1:])  # same frequency all along


def test_stream_that_reaches_the_signal_end_restarts_and_says_so():
    sig = make_signal(SignalSpec(duration_s=0.2), seed=0)  # 200 samples: 4 windows of 50 at most
    streams = Streams([sig], rows=1, window=50, rng=np.random.default_rng(1))
    seen_restart = False
    for _ in range(6):
        before = int(streams.pos[0])
        _, _, restarted = streams.next()
        assert bool(restarted[0]) == (before + 50 > 200)
        if restarted[0]:
            seen_restart = True
            assert int(streams.pos[0]) < 100  # a fresh start in the first window plus one read
    assert seen_restart


def test_module_zeroes_the_carried_state_of_restarted_streams_only():
    from training.frequency.train import FrequencyModule

    cfg = CONFIGS["tiny"]
    sig = make_signal(cfg.signal, seed=0)
    module = FrequencyModule(cfg, [sig])
    module.stream_h.fill_(0.5)
    module.stream_c.fill_(0.5)
    seen = {}

    def spy(x, h0, c0):
        seen["h0"] = h0.clone()
        return type(module.model).forward(module.model, x, h0, c0)

    module.model.forward = spy
    module.streams.pos[0] = sig.mixed.shape[0]  # row 0 is at the end: it must restart
    module.training_step(0, 0)
    assert torch.all(seen["h0"][:, 0] == 0)
    assert torch.all(seen["h0"][:, 1:] == 0.5)


def test_zero_state_window_loss_ramps_in_over_the_burn_in():
    cfg = dataclasses.replace(CONFIGS["default"], window=100, burn_in=20)
    w = loss_weights(cfg).numpy()
    assert w.shape == (100,) and w[0] == np.float32(1 / 20) and np.all(w[19:] == 1.0)
    assert np.all(np.diff(w) >= 0)
    assert np.all(loss_weights(dataclasses.replace(cfg, burn_in=1)).numpy() == 1.0)
