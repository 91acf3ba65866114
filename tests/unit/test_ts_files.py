"""deploy/ts_files.py: the one reader of TorchServe's config.properties and key_file.json."""

import json

from deploy.ts_files import read_keys, read_properties, render_properties, token_auth_on


def write_keys(path):
    data = {n: {"key": f"{n}-key", "expiration time": "x"} for n in ("inference", "management")}
    path.write_text(json.dumps(data | {"API": {"key": "api-key"}}))
    return path


def test_keys_from_the_file_or_its_working_directory_with_the_api_key_lower_cased(tmp_path):
    want = {"inference": "inference-key", "management": "management-key", "api": "api-key"}
    assert read_keys(write_keys(tmp_path / "key_file.json")) == want
    assert read_keys(tmp_path) == want


def test_properties_skip_comments_and_token_auth_is_on_unless_disabled(tmp_path):
    assert token_auth_on(tmp_path)  # no config.properties: TorchServe's default
    text = render_properties("# c\ninference_address=a\n", {"disable_token_authorization": "TRUE"})
    (tmp_path / "config.properties").write_text(text)
    assert read_properties(tmp_path / "config.properties") == {
        "inference_address": "a",
        "disable_token_authorization": "TRUE",
    }
    assert not token_auth_on(tmp_path)
