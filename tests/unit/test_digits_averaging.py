"""Digits training's weight averaging (TrainConfig.ema_decay: the exponential moving average of the
weights is what validation, early stopping and the export see; with it off, the last weights) and
the loss weight of the dataset's own digits (TrainConfig.dataset_weight)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from training.digits.config import CONFIGS
from training.digits.data import load_splits
from training.digits.train import DigitsModule, export_block


@pytest.fixture(scope="module")
def export():
    return export_block(CONFIGS["tiny"], load_splits()["train"])


def _module(export, decay: float) -> DigitsModule:
    cfg = dataclasses.replace(CONFIGS["tiny"], ema_decay=decay, outlier_weight=0.0)
    return DigitsModule(cfg, export, steps=10)


def test_the_averaged_weights_follow_each_step_at_the_decay(export):
    module = _module(export, 0.5)
    assert module.served() is not module.model
    weight = next(module.model.parameters())
    with torch.no_grad():
        weight.add_(1.0)
    module.on_train_batch_end(None, None, 0)  # the first update copies the weights
    torch.testing.assert_close(next(module.served().parameters()), weight)
    with torch.no_grad():
        weight.add_(1.0)
    module.on_train_batch_end(None, None, 1)  # then 0.5 * average + 0.5 * weights
    torch.testing.assert_close(next(module.served().parameters()), weight - 0.5)


def test_validation_reads_the_averaged_network(export):
    module = _module(export, 0.5)
    module.on_train_batch_end(None, None, 0)
    with torch.no_grad():
        for p in module.model.parameters():
            p.add_(torch.randn_like(p))  # the last weights move on; the average does not
    module.eval()
    x = torch.from_numpy(np.zeros((4, *CONFIGS["tiny"].input_shape), np.float32))
    logged: dict = {}
    module.log = lambda name, value, **_: logged.setdefault(name, float(value))
    module.validation_step((x, torch.zeros(4, dtype=torch.long)), 0)
    with torch.no_grad():
        averaged = torch.nn.functional.cross_entropy(module.served()(x)[0], torch.zeros(4).long())
        last = torch.nn.functional.cross_entropy(module.model(x)[0], torch.zeros(4).long())
    assert logged["val_loss"] == pytest.approx(float(averaged))
    assert float(averaged) != pytest.approx(float(last))


def test_without_averaging_the_last_weights_are_served(export):
    module = _module(export, 0.0)
    assert module.ema is None and module.served() is module.model


def test_the_dataset_digits_weigh_dataset_weight_in_the_loss(export):
    """training_step's loss is the weighted mean of the per-image cross-entropy: the dataset's own
    digits (weight dataset_weight) against redrawn copies and glyphs (1)."""
    cfg = dataclasses.replace(CONFIGS["tiny"], outlier_weight=0.0, shift=0.0, dropout=0.0,
                              label_smoothing=0.0, dataset_weight=3.0)  # fmt: skip
    module = DigitsModule(cfg, export, steps=10)
    module.log = lambda *a, **k: None
    x = torch.from_numpy(
        np.random.default_rng(0).normal(size=(4, *cfg.input_shape)).astype(np.float32)
    )
    y = torch.tensor([0, 1, 2, 3])
    weight = torch.tensor([3.0, 3.0, 1.0, 1.0])
    loss = module.training_step((x, y, weight), 0)
    with torch.no_grad():
        each = torch.nn.functional.cross_entropy(module.model(x)[0], y, reduction="none")
    expected = float((each * weight).sum() / weight.sum())
    assert float(loss) == pytest.approx(expected, rel=1e-5)
    assert float(loss) != pytest.approx(float(each.mean()), rel=1e-3)  # not the plain mean
