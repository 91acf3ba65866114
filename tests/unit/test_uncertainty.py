"""handlers.uncertainty: calibrated probabilities, entropy and the MC-dropout head, checked against
torch (the head's training-time twin) and against the properties the handler relies on."""

import math

import numpy as np
import pytest
import torch

from handlers.uncertainty import MLPHead, classify_with_uncertainty, entropy, softmax


@pytest.fixture(scope="module")
def torch_head():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Dropout(0.3),
        torch.nn.Linear(6, 5),
        torch.nn.GELU(approximate="tanh"),
        torch.nn.Dropout(0.3),
        torch.nn.Linear(5, 2),
    ).eval()


@pytest.fixture(scope="module")
def head(torch_head):
    return MLPHead(
        weights=(torch_head[1].weight.detach().numpy(), torch_head[4].weight.detach().numpy()),
        biases=(torch_head[1].bias.detach().numpy(), torch_head[4].bias.detach().numpy()),
        activations=("gelu", "none"),
        dropout=0.3,
    )


@pytest.fixture(scope="module")
def features():
    return np.random.default_rng(1).normal(size=(7, 6)).astype(np.float32)


def test_deterministic_head_matches_torch_eval(head, torch_head, features):
    with torch.no_grad():
        want = torch_head(torch.from_numpy(features)).numpy()
    np.testing.assert_allclose(head.forward(features), want, atol=1e-5)


def test_masked_head_matches_torch_with_the_same_masks(head, torch_head, features):
    masks = head.masks(3, seed=5)
    got = head.forward(features, masks)
    assert got.shape == (3, 7, 2)
    with torch.no_grad():
        for s in range(3):
            x = torch.from_numpy(features) * torch.from_numpy(masks[0][s])
            x = torch_head[2](torch_head[1](x)) * torch.from_numpy(masks[1][s])
            np.testing.assert_allclose(got[s], torch_head[4](x).numpy(), atol=1e-5)


def test_masks_are_fixed_by_seed_and_inverted_dropout_scaled(head):
    a, b, c = head.masks(64, seed=3), head.masks(64, seed=3), head.masks(64, seed=4)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not np.array_equal(a[0], c[0])
    assert set(np.unique(a[0])) == {0.0, np.float32(1 / 0.7)}
    assert abs(a[0].mean() - 1.0) < 0.1


def test_save_load_round_trip(head, features, tmp_path):
    head.save(tmp_path / "head.npz")
    back = MLPHead.load(tmp_path / "head.npz")
    assert back.activations == head.activations and back.dropout == pytest.approx(0.3)
    np.testing.assert_array_equal(back.forward(features), head.forward(features))


def test_softmax_sums_to_one_and_temperature_flattens():
    logits = np.array([[2.0, -1.0], [0.0, 5.0]])
    sharp, flat = softmax(logits, 1.0), softmax(logits, 3.0)
    np.testing.assert_allclose(sharp.sum(-1), 1.0)
    assert (entropy(flat) > entropy(sharp)).all()
    assert (flat.argmax(-1) == sharp.argmax(-1)).all()


def test_entropy_of_uniform_is_log_classes_and_of_certain_is_zero():
    assert entropy(np.full(4, 0.25)) == pytest.approx(math.log(4))
    assert entropy(np.array([1.0, 0.0])) == pytest.approx(0.0, abs=1e-9)


def test_classify_reports_per_row_spread_independent_of_batch(head, features):
    masks = head.masks(16, seed=0)
    full = classify_with_uncertainty(features, head, masks, temperature=1.5)
    alone = classify_with_uncertainty(features[2:3], head, masks, temperature=1.5)
    assert full.probabilities.shape == (7, 2) and full.samples == 16
    np.testing.assert_allclose(alone.probabilities[0], full.probabilities[2], atol=1e-6)
    np.testing.assert_allclose(alone.std[0], full.std[2], atol=1e-6)
    np.testing.assert_allclose(alone.mutual_information[0], full.mutual_information[2], atol=1e-6)
    assert (full.mutual_information >= 0).all() and (full.std > 0).all()
    np.testing.assert_allclose(full.entropy, entropy(full.probabilities))


def test_no_dropout_means_no_epistemic_spread(head, features):
    still = MLPHead(head.weights, head.biases, head.activations, dropout=0.0)
    u = classify_with_uncertainty(features, still, still.masks(8), temperature=1.0)
    np.testing.assert_allclose(u.mutual_information, 0.0, atol=1e-6)
    np.testing.assert_allclose(u.std, 0.0, atol=1e-6)


def test_mc_spread_has_the_output_shape(head, features):
    mean, std = head.forward(features), head.forward(features, head.masks(10, seed=2)).std(axis=0)
    assert mean.shape == std.shape == (7, 2)
    assert (std > 0).all()


def test_a_rows_answer_is_bitwise_the_same_whatever_its_batch():
    """BLAS picks its kernel and summation order by the matrix shape: computed over a whole
    batch, a text's MC spread moved by about 1e-7 with its neighbours (seen served, sentiment's
    384 -> 256 -> 2 head). Each row now goes through the head alone."""
    rng = np.random.default_rng(0)
    head = MLPHead(
        [rng.standard_normal((256, 384)).astype(np.float32) / 20,
         rng.standard_normal((2, 256)).astype(np.float32) / 16],
        [np.zeros(256, np.float32), np.zeros(2, np.float32)],
        ["relu", "none"],
        dropout=0.1,
    )  # fmt: skip
    masks = head.masks(16, seed=0)
    features = rng.standard_normal((8, 384)).astype(np.float32)
    full = classify_with_uncertainty(features, head, masks, temperature=1.05)
    for i in range(8):
        alone = classify_with_uncertainty(features[i : i + 1], head, masks, temperature=1.05)
        assert np.array_equal(alone.probabilities[0], full.probabilities[i])
        assert alone.std[0] == full.std[i]
        assert alone.mutual_information[0] == full.mutual_information[i]
    empty = classify_with_uncertainty(features[:0], head, masks, temperature=1.05)
    assert empty.probabilities.shape == (0, 2) and empty.std.shape == (0,)
