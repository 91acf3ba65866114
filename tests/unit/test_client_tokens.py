"""Token sources: explicit keys, environment variables and the key file, and refreshing from it."""

from __future__ import annotations

import json

import pytest

from clients.tokens import TokenSource, read_key_file


def write_keys(path, inference="inf-1", management="man-1", api="api-1"):
    path.write_text(
        json.dumps(
            {
                "management": {"key": management, "expiration time": "2030-01-01T00:00:00Z"},
                "inference": {"key": inference, "expiration time": "2030-01-01T00:00:00Z"},
                "API": {"key": api},
            }
        )
    )
    return path


def test_key_file_is_read_as_torchserve_writes_it(tmp_path):
    keys = read_key_file(write_keys(tmp_path / "key_file.json"))
    assert keys == {"inference": "inf-1", "management": "man-1", "api": "api-1"}


def test_explicit_key_wins_over_env_and_env_over_file(tmp_path, monkeypatch):
    path = write_keys(tmp_path / "key_file.json")
    monkeypatch.setenv("TS_INFERENCE_KEY", "from-env")
    monkeypatch.delenv("TS_MANAGEMENT_KEY", raising=False)
    assert TokenSource(key_file=path, keys={"inference": "explicit"}).get("inference") == "explicit"
    tokens = TokenSource(key_file=path)
    assert tokens.get("inference") == "from-env"
    assert tokens.get("management") == "man-1"


def test_refused_key_is_replaced_by_the_rotated_one_in_the_file(tmp_path, monkeypatch):
    monkeypatch.delenv("TS_INFERENCE_KEY", raising=False)
    path = write_keys(tmp_path / "key_file.json")
    tokens = TokenSource(key_file=path)
    assert tokens.get("inference") == "inf-1"
    write_keys(path, inference="inf-2")
    assert tokens.get("inference") == "inf-1"  # cached until refused
    assert tokens.refresh("inference", rejected="inf-1") == "inf-2"
    assert tokens.get("inference") == "inf-2"


def test_no_refresh_without_a_key_file_or_a_token_api(tmp_path, monkeypatch):
    monkeypatch.delenv("TS_INFERENCE_KEY", raising=False)
    assert TokenSource(keys={"inference": "k"}).refresh("inference", "k") is None
    path = write_keys(tmp_path / "key_file.json")
    # Same key still in the file and no management address to mint a new one.
    assert TokenSource(key_file=path).refresh("inference", "inf-1") is None


def test_no_token_configured_means_no_header(monkeypatch):
    monkeypatch.delenv("TS_INFERENCE_KEY", raising=False)
    assert TokenSource().get("inference") is None


def test_refusal_without_a_key_file_names_the_file_it_looked_for(tmp_path, monkeypatch):
    from clients.client import with_token
    from clients.errors import AuthError

    monkeypatch.delenv("TS_INFERENCE_KEY", raising=False)
    missing = tmp_path / "nowhere" / "key_file.json"
    tokens = TokenSource(key_file=missing)

    def refused(key):
        assert key is None
        raise AuthError("Token Authorization failed", kind="InvalidKeyException")

    with pytest.raises(AuthError) as e:
        with_token(tokens, "inference", refused)
    assert str(missing) in e.value.reason and "does not exist" in e.value.reason
    assert "TS_INFERENCE_KEY" in e.value.reason
