"""Stream state carried by the client: chunked streams equal whole ones, and a state token is
checked (size, signature, key, model version, finiteness) before any of it is used."""

import base64
import os

import numpy as np
import pytest

from handlers.errors import ArchiveError, BadState, StaleState
from handlers.frequency.engine import FrequencyEngine
from handlers.frequency.settings import parse_settings
from handlers.frequency.state import (
    KEY_FILE_ENV,
    LOCAL_KEY_NAME,
    StateCodec,
    StreamState,
    load_key,
    local_key_dir,
)
from handlers.kits.signal.codec import SignalRequest
from handlers.manifest import read_manifest
from training.frequency.config import CONFIGS
from training.frequency.data import make_signal

SERVED = (1.0, 3.0, 5.0, 7.0)
KEY = b"k" * 32


def codec(key: bytes = KEY, version: str = "v1") -> StateCodec:
    return StateCodec(key, version, layers=2, hidden=4, num_frequencies=4)


def state(f: int = 2, seen: int = 123) -> StreamState:
    rng = np.random.default_rng(f)
    h = rng.standard_normal((2, f, 4)).astype(np.float32)
    sel = (3, 1)[:f]
    return StreamState(h, -h, tuple(SERVED[s] for s in sel), sel, seen)


def test_state_round_trips_exactly_and_is_ascii():
    token = codec().encode(state())
    assert token.isascii() and token.replace("-", "").replace("_", "").rstrip("=").isalnum()
    back = codec().decode(token, SERVED)
    np.testing.assert_array_equal(back.h, state().h)
    np.testing.assert_array_equal(back.c, state().c)
    assert (back.frequencies, back.selectors, back.samples_seen) == ((7.0, 3.0), (3, 1), 123)


def grow(token: str, extra: bytes) -> str:
    return base64.urlsafe_b64encode(base64.urlsafe_b64decode(token) + extra).decode()


def flip(token: str, at: int) -> str:
    raw = bytearray(base64.urlsafe_b64decode(token))
    raw[at] ^= 0x01
    return base64.urlsafe_b64encode(bytes(raw)).decode()


@pytest.mark.parametrize(
    ("mangle", "words"),
    [
        (lambda t: t[:-8], "wrong size"),
        (lambda t: grow(t, b"\0\0\0"), "wrong size"),
        (lambda t: "A" * 10_000, "wrong size"),
        (lambda t: "", "wrong size"),
        (lambda t: t[:20] + "!" + t[21:], "not decodable"),
        (lambda t: t[:20] + "é" + t[21:], "not decodable"),
        (lambda t: base64.urlsafe_b64encode(b"XXXX" + b"\0" * 40).decode(), "not a stream state"),
        (lambda t: flip(t, -30), "altered"),  # a float of c
        (lambda t: flip(t, 13), "altered"),  # the model version's text: no 409 by forgery
        (lambda t: 42, "must be the string"),
    ],
)
def test_bad_state_is_a_400_with_a_reason(mangle, words):
    with pytest.raises(BadState) as e:
        codec().decode(mangle(codec().encode(state())), SERVED)
    assert e.value.status == 400 and words in e.value.reason


def test_non_finite_state_is_refused_even_when_signed():
    bad = state()
    bad.h[0, 0, 0] = np.nan
    with pytest.raises(BadState, match="NaN or infinite"):
        codec().decode(codec().encode(bad), SERVED)


def test_state_of_another_model_version_or_key_is_a_409_that_says_restart():
    token = codec(version="v1").encode(state())
    for other in (codec(version="v2"), codec(key=b"z" * 32)):
        with pytest.raises(StaleState) as e:
            other.decode(token, SERVED)
        assert e.value.status == 409 and "restart the stream" in e.value.reason
    assert (
        "'v1'" in pytest.raises(StaleState, codec(version="v2").decode, token, SERVED).value.reason
    )


def test_state_naming_unserved_frequencies_is_refused():
    small = StateCodec(KEY, "v1", layers=2, hidden=4, num_frequencies=2)
    with pytest.raises(BadState, match="does not serve"):
        small.decode(codec().encode(state()), SERVED[:2])  # selector 3 of a 2-frequency model


def test_key_comes_from_the_named_file(tmp_path):
    (tmp_path / "key").write_text("a-secret-from-a-kubernetes-secret\n")
    assert load_key({KEY_FILE_ENV: str(tmp_path / "key")}) == b"a-secret-from-a-kubernetes-secret"
    (tmp_path / "short").write_text("tiny")
    with pytest.raises(ArchiveError, match="under 16 bytes"):
        load_key({KEY_FILE_ENV: str(tmp_path / "short")})
    with pytest.raises(ArchiveError, match="cannot read"):
        load_key({KEY_FILE_ENV: str(tmp_path / "missing")})


def test_local_key_is_generated_once_private_and_shared_by_workers(tmp_path):
    env = {"TMPDIR": str(tmp_path)}
    first = load_key(env)
    assert len(first) >= 32 and load_key(env) == first  # a second worker reads the same key
    folder = local_key_dir(env)
    assert folder.parent == tmp_path and oct(os.stat(folder).st_mode & 0o777) == "0o700"
    path = folder / LOCAL_KEY_NAME
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    assert sorted(p.name for p in folder.iterdir()) == [LOCAL_KEY_NAME]  # no temp left over
    assert load_key({"TMPDIR": str(tmp_path / "other")}) != first


def test_a_key_planted_in_the_shared_temp_folder_is_not_adopted(tmp_path):
    """Another local user gets to /tmp first: neither their key nor their folder is used."""
    env = {"TMPDIR": str(tmp_path)}
    folder = tmp_path / f"torchserve-deploy-{os.geteuid()}"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    (folder / LOCAL_KEY_NAME).write_bytes(b"a-key-the-attacker-knows-well\n")
    with pytest.raises(ArchiveError, match="mode 0700"):
        load_key(env)
    if os.geteuid() == 0:  # only root can hand a folder to someone else
        folder.chmod(0o700)
        os.chown(folder, 4242, 4242)
        with pytest.raises(ArchiveError, match="owned by uid"):
            load_key(env)


@pytest.mark.parametrize(
    "kind", ["dangling-link", "link-to-a-key", "short", "world-readable", "fifo"]
)
def test_a_bad_local_key_file_is_a_clear_load_error(tmp_path, kind):
    env = {"TMPDIR": str(tmp_path)}
    path = local_key_dir(env) / LOCAL_KEY_NAME
    elsewhere = tmp_path / "elsewhere.key"
    elsewhere.write_bytes(b"k" * 40)
    elsewhere.chmod(0o600)
    if kind == "dangling-link":
        path.symlink_to(tmp_path / "nothing-here")
    elif kind == "link-to-a-key":
        path.symlink_to(elsewhere)
    elif kind == "short":
        path.write_bytes(b"tiny")
        path.chmod(0o600)
    elif kind == "world-readable":
        path.write_bytes(b"k" * 40)
        path.chmod(0o644)
    else:
        os.mkfifo(path, 0o600)  # would block a plain open() forever
    with pytest.raises(ArchiveError, match="stream state key"):
        load_key(env)


def test_forged_sample_count_near_2_64_is_bad_state_not_an_overflow():
    token = codec().encode(state(seen=2**64 - 10))
    with pytest.raises(BadState, match="sample count"):
        codec().decode(token, SERVED)


def test_a_model_version_over_255_bytes_still_continues_its_streams():
    long = codec(version="v" * 300)
    assert long.decode(long.encode(state()), SERVED).samples_seen == 123


@pytest.fixture(scope="module")
def engine(frequency_artifacts):
    settings = parse_settings(read_manifest(frequency_artifacts), {"runtime": "onnx"})
    return FrequencyEngine(settings, frequency_artifacts)


def test_chunked_stream_equals_whole_stream(engine):
    sig = make_signal(CONFIGS["tiny"].signal, seed=5).mixed
    req = SignalRequest(sig, 1000, (1.0, 7.0), (0, 3))
    ((whole, _),) = engine.stream([(req, engine.zero_state(req))])
    st = engine.zero_state(req)
    parts = []
    for chunk in np.array_split(sig, [1, 40, 41, 700]):
        ((comp, st),) = engine.stream(
            [(SignalRequest(chunk, 1000, req.frequencies, req.selectors), st)]
        )
        parts.append(comp.signal)
    assert st.samples_seen == sig.shape[0]
    assert np.abs(np.concatenate(parts, axis=1) - whole.signal).max() <= 1e-5


def test_streams_batched_together_do_not_leak_state(engine):
    a = make_signal(CONFIGS["tiny"].signal, seed=6).mixed[:300]
    b = make_signal(CONFIGS["tiny"].signal, seed=7).mixed[:300]
    ra, rb = SignalRequest(a, 1000, (3.0,), (1,)), SignalRequest(b, 1000, (3.0, 5.0), (1, 2))
    together = engine.stream([(ra, engine.zero_state(ra)), (rb, engine.zero_state(rb))])
    ((alone_b, _),) = engine.stream([(rb, engine.zero_state(rb))])
    np.testing.assert_allclose(together[1][0].signal, alone_b.signal, atol=1e-5)
    assert together[0][0].signal.shape == (1, 300) and together[1][1].h.shape[1] == 2


def test_std_band_is_the_exact_dropout_std_of_the_iq_head():
    """Every one of the 2^H dropout masks, weighted by its probability: the band of the answer
    I*sin + Q*cos is their std, at every phase of the reference."""
    import itertools

    from handlers.frequency.lockin import band, band_terms

    rng = np.random.default_rng(0)
    hidden, p, block = 6, 0.3, 4
    weight = rng.standard_normal((2, hidden))
    states = rng.standard_normal((3, 5, hidden))  # (rows, blocks, H)
    theta = rng.uniform(0, 2 * np.pi, size=(3, 5 * block))
    sin, cos = np.sin(theta), np.cos(theta)
    kept = np.array(list(itertools.product([0.0, 1.0], repeat=hidden)))  # (2^H, H)
    prob = np.prod(np.where(kept == 1.0, 1 - p, p), axis=1)
    iq = np.einsum("rbh,mh,oh->mrbo", states, kept / (1 - p), weight)  # (2^H, rows, blocks, 2)
    rep = np.repeat(iq, block, axis=2)
    samples = rep[..., 0] * sin + rep[..., 1] * cos  # (2^H, rows, N)
    mean = np.tensordot(prob, samples, axes=1)
    want = np.sqrt(np.tensordot(prob, (samples - mean) ** 2, axes=1))
    got = band(band_terms(states, weight, p), sin, cos, block)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)


def test_state_carries_the_judged_sums_and_checks_them():
    from handlers.frequency.stationarity import Stats, of_signal

    x = np.random.default_rng(7).normal(size=2500)
    sums = of_signal(x, 1000, SERVED)
    full = StreamState(state().h, state().c, (7.0, 3.0), (3, 1), 2500, float(x @ x), None, sums)
    checked = StateCodec(KEY, "v1", layers=2, hidden=4, num_frequencies=4, window=1000)
    back = checked.decode(checked.encode(full), SERVED)
    np.testing.assert_array_equal(back.stats.to_array(), sums.to_array())
    # signed, but its sums disagree with its sample count (2 windows, not 3): refused
    wrong = StreamState(full.h, full.c, full.frequencies, full.selectors, 3500, 1.0, None, sums)
    with pytest.raises(BadState, match="judged sums"):
        checked.decode(checked.encode(wrong), SERVED)
    bad = Stats.from_array(np.where(np.arange(31) == 1, -1.0, sums.to_array()), 4)  # energy < 0
    forged = StreamState(full.h, full.c, full.frequencies, full.selectors, 2500, 1.0, None, bad)
    with pytest.raises(BadState, match="judged sums"):
        checked.decode(checked.encode(forged), SERVED)


def test_a_state_of_the_earlier_format_is_stale_not_foreign():
    token = codec().encode(state())
    raw = bytearray(base64.urlsafe_b64decode(token))
    raw[:4] = b"FQS2"  # the format before the judged sums
    with pytest.raises(StaleState) as e:
        codec().decode(base64.urlsafe_b64encode(bytes(raw)).decode(), SERVED)
    assert e.value.status == 409 and "restart the stream" in e.value.reason
