"""The served std band, calibrated: training fits one factor per mode on held-out signals
(training/frequency/quality.calibrate), the manifest carries it, the engine serves std x factor,
and the coverage on the test signals is floored."""

import dataclasses
import json
import shutil

import numpy as np
import pytest

from handlers.errors import ArchiveError
from handlers.frequency.predict import FrequencyPredictor
from handlers.frequency.settings import BandScale, FrequencyExport
from handlers.kits.signal.codec import SignalRequest
from handlers.manifest import read_manifest
from training.common.floors import QualityError
from training.frequency.config import CONFIGS
from training.frequency.quality import MODES, coverage, fit_band_scale

TINY = CONFIGS["tiny"]
CONFIG = {"runtime": "onnx", "threads": 1, "max_samples": 5000, "mc_samples": 8}
KEY = b"a-test-key-shared-by-every-worker"


def test_the_fitted_factor_brings_a_too_narrow_band_to_its_nominal_share():
    # Errors three times the std the band says (as the streams' band was): +-2 std holds about
    # half the truth; the factor fitted on one draw holds the nominal share on another.
    rng = np.random.default_rng(0)

    def draw(n=200_000):
        std = rng.uniform(0.05, 0.5, n)
        out = rng.normal(0, 1, n)
        return out, std, out + rng.normal(0, 1, n) * 3 * std

    out, std, truth = draw()
    assert coverage(out, std, truth) < 0.6
    factor = fit_band_scale(out, std, truth, 0.9545)
    assert factor == pytest.approx(3.0, rel=0.03)
    out, std, truth = draw()
    assert coverage(out, std * factor, truth) == pytest.approx(0.9545, abs=0.003)
    # Too wide a band is narrowed the same way.
    assert fit_band_scale(out, std * 10, truth, 0.9545) == pytest.approx(factor / 10, rel=0.03)


def test_samples_with_no_spread_are_left_out_of_the_fit():
    # A stream's first block answers 0 with std 0: no factor covers it, and it must not make the
    # factor infinite (here 10 % of the samples, more than the 4.5 % the band may miss).
    rng = np.random.default_rng(1)
    std = rng.uniform(0.1, 0.2, 10_000)
    out = np.zeros_like(std)
    truth = rng.normal(0, 1, std.shape) * std
    std[:1000] = 0.0
    truth[:1000] = 1.0
    factor = fit_band_scale(out, std, truth, 0.9545)
    assert np.isfinite(factor) and factor == pytest.approx(1.0, rel=0.05)


def _export_block() -> dict:
    from training.frequency.__main__ import handler_settings

    scale = BandScale(100, (0.8,), (4.0, 2.0, 1.5))
    return handler_settings(TINY, scale).to_block()


def test_the_manifest_band_scale_round_trips_and_a_bad_one_fails_the_load():
    block = _export_block()
    export = FrequencyExport.from_block(block)
    assert export.to_block() == block
    scale = export.band_scale
    assert scale is not None and scale.step == 100
    # By index since the request / stream began, the last factor holding on.
    np.testing.assert_array_equal(scale.factors("windows", 0, 3), [0.8] * 3)
    np.testing.assert_array_equal(scale.factors("stream", 98, 4), [4.0, 4.0, 2.0, 2.0])
    np.testing.assert_array_equal(scale.factors("stream", 10_000, 2), [1.5, 1.5])
    old = {k: v for k, v in block.items() if k != "band_scale"}  # an export from before
    assert FrequencyExport.from_block(old).band_scale is None
    good = block["band_scale"]
    bad_values = [{"windows": [1.0], "stream": [1.0]}, good | {"step": 0}, good | {"step": 1.5},
                  good | {"windows": []}, good | {"windows": [0.0]}, good | {"stream": [-1.0]},
                  good | {"stream": [True]}, good | {"stream": [float("inf")]},
                  good | {"windows": 1.0}, good | {"other": 1}, [1.0, 2.0], "1.0"]  # fmt: skip
    for bad in bad_values:
        with pytest.raises(ArchiveError, match="band_scale"):
            FrequencyExport.from_block(block | {"band_scale": bad})


def test_training_fits_the_factors_and_the_manifest_carries_them(frequency_artifacts):
    manifest = read_manifest(frequency_artifacts)
    metrics = json.loads((frequency_artifacts / "metrics.json").read_text())
    scale = manifest["handler"]["band_scale"]
    assert scale["step"] == TINY.band_step and len(scale["windows"]) == 1
    # The tiny signals are 400 samples: a factor per 100 of them.
    assert len(scale["stream"]) == TINY.eval_samples // TINY.band_step
    assert all(v > 0 for mode in MODES for v in scale[mode])
    assert metrics["band_scale"] == scale == manifest["metrics"]["band_scale"]
    for mode in MODES:
        q = metrics["quality"][mode]
        assert manifest["metrics"]["band_coverage"][mode] == q["band_coverage"]
        for k in ("band_coverage", "band_coverage_raw", "band_coverage_first_500"):
            assert 0 <= q[k] <= 1


def test_the_engine_serves_the_dropout_std_times_the_manifests_factors(
    frequency_artifacts, tmp_path
):
    """The same export under other factors: each sample's std scales by exactly its factor's
    ratio, the answers do not move; a stream's factor follows the samples it has read."""
    manifest = read_manifest(frequency_artifacts)
    fitted = BandScale.from_block(manifest["handler"]["band_scale"])
    assert fitted is not None
    mine = BandScale(100, (3.0,), (0.25, 0.5, 2.0))
    other = tmp_path / "artifacts"
    shutil.copytree(frequency_artifacts, other)
    manifest["handler"]["band_scale"] = mine.to_block()
    (other / "manifest.json").write_text(json.dumps(manifest))
    engines = [FrequencyPredictor.from_dir(d, CONFIG, state_key=KEY).engine
               for d in (frequency_artifacts, other)]  # fmt: skip
    signal = np.random.default_rng(3).normal(0, 1, 1300).astype(np.float32)
    freqs = engines[0].settings.frequencies
    req = SignalRequest(signal, engines[0].settings.sample_rate, freqs, tuple(range(len(freqs))))
    a, b = (e.windows([req])[0] for e in engines)
    np.testing.assert_array_equal(a.signal, b.signal)
    assert a.std.max() > 0
    ratio = mine.factors("windows", 0, 1300) / fitted.factors("windows", 0, 1300)
    np.testing.assert_allclose(b.std, a.std * ratio, rtol=1e-6, atol=1e-12)
    # Two chunks of a stream: the second's factors continue from its 150th sample.
    states = [e.zero_state(req) for e in engines]
    for lo, hi in ((0, 150), (150, 1300)):
        chunk = SignalRequest(signal[lo:hi], req.sample_rate, freqs, req.selectors)
        (sa, states[0]), (sb, states[1]) = (e.stream([(chunk, st)])[0]
                                            for e, st in zip(engines, states, strict=True))  # fmt: skip
        np.testing.assert_array_equal(sa.signal, sb.signal)
        assert sa.std.max() > 0
        ratio = mine.factors("stream", lo, hi - lo) / fitted.factors("stream", lo, hi - lo)
        np.testing.assert_allclose(sb.std, sa.std * ratio, rtol=1e-5, atol=1e-9)


def test_a_band_outside_its_coverage_floor_stops_the_training(tmp_path):
    # An impossible ceiling (more than everything outside the band): the training stops before
    # anything is exported, naming the band's figures.
    from training.frequency.__main__ import run

    cfg = dataclasses.replace(TINY, steps=20, floors_coverage=0.5, floors_outside=1.01)
    with pytest.raises(QualityError, match=r"outside the served \+-2 std .*MISSED") as err:
        run(tmp_path, cfg, plots=False, progress=False, jobs=1)
    assert set(err.value.figures) == {
        f"{m}_band_{k}" for m in MODES for k in ("coverage", "outside")
    }
    assert not (tmp_path / "manifest.json").exists()
