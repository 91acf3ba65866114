"""Training batches: stream rows read consecutive windows of blocks and carry their state."""

import numpy as np
import torch

from handlers.frequency.family import TRAINING
from training.frequency.config import CONFIGS
from training.frequency.data import draw_many, stream_tables
from training.frequency.train import Streams, train_signals

FREQS = (1.0, 3.0, 5.0, 7.0)


def tables(count=2, n=1000):
    drawn = draw_many(TRAINING, np.random.default_rng(0), count, n)
    return stream_tables(drawn, FREQS, 1000, 20)  # (S, F, 50, 6), (S, F, 50, 2)


def test_stream_rows_read_consecutive_windows():
    x, y = tables()
    streams = Streams(x, y, rows=3, blocks=5, rng=np.random.default_rng(0))
    x1, _, _ = streams.next()
    pos = streams.pos.copy()
    x2, y2, restarted = streams.next()
    for r in range(3):
        if restarted[r]:
            continue
        w, sel = int(streams.which[r]), int(streams.sel[r])
        np.testing.assert_array_equal(x2[r], x[w, sel, pos[r] : pos[r] + 5])
        np.testing.assert_array_equal(y2[r], y[w, sel, pos[r] : pos[r] + 5])
        np.testing.assert_array_equal(x2[r, :, 2:], x1[r, :, 2:])  # same frequency all along


def test_stream_that_reaches_the_signal_end_restarts_at_its_start_and_says_so():
    x, y = tables(count=1, n=200)  # 10 blocks: 2 windows of 5
    streams = Streams(x, y, rows=1, blocks=5, rng=np.random.default_rng(1))
    seen_restart = False
    for _ in range(5):
        before = int(streams.pos[0])
        _, _, restarted = streams.next()
        assert bool(restarted[0]) == (before + 5 > 10)
        if restarted[0]:
            seen_restart = True
            assert int(streams.pos[0]) == 5  # read from the signal's first block
    assert seen_restart


def test_module_zeroes_the_carried_state_of_restarted_streams_only():
    from training.frequency.train import FrequencyModule

    cfg = CONFIGS["tiny"]
    module = FrequencyModule(cfg, train_signals(cfg))
    module.stream_h.fill_(0.5)
    module.stream_c.fill_(0.5)
    seen = {}

    def spy(x, h0, c0):
        seen["h0"] = h0.clone()
        return type(module.model).forward(module.model, x, h0, c0)

    module.model.forward = spy
    module.streams.pos[0] = module.streams.x.shape[2]  # row 0 is at the end: it must restart
    module.training_step(0, 0)
    assert torch.all(seen["h0"][:, 0] == 0)
    assert torch.all(seen["h0"][:, 1:] == 0.5)
