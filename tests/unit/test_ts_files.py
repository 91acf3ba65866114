"""deploy/ts_files.py: the one reader of TorchServe's config.properties and key_file.json."""

import json
from pathlib import Path

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


# model_log.log as TorchServe 0.12 writes it (log4j pattern "%d [%p] %t %c - %m", one line per line
# of the worker's output; thread W-<port>-<model>_<version>-stdout), trimmed.
W = "[INFO ] W-9000-sentiment_1.0-stdout MODEL_LOG -"
F = "[INFO ] W-9001-frequency_1.0-stdout MODEL_LOG -"
GPU_LOG = f"""\
2026-11-26T12:21:58,156 {W} model_name: sentiment, batchSize: 8
2026-11-26T12:21:58,162 {F} model_name: frequency, batchSize: 8
2026-11-26T12:21:58,179 {W} Backend worker process died.
2026-11-26T12:21:58,179 {W} Traceback (most recent call last):
2026-11-26T12:21:58,182 {W}   File "/opt/venv/lib/python3.11/site-packages/ts/model_service_worker.py", line 301, in <module>
2026-11-26T12:21:58,190 {W}     raise ArchiveError(
2026-11-26T12:21:58,191 {W} handlers.errors.ArchiveError: GPU unavailable: TS_REQUIRE_GPU=1 and TorchServe gave this worker gpu_id 0, but CUDA is unavailable: The NVIDIA driver on your system is too old (found version 12040).
2026-11-26T12:21:58,200 {F} Failed to load model frequency, exception deliberately corrupt archive
2026-11-26T12:21:58,201 {F} RuntimeError: deliberately corrupt archive
"""


def test_a_models_last_load_failure_is_read_from_its_own_workers_lines(tmp_path, monkeypatch):
    from deploy.ts_files import load_failure, log_dir

    (tmp_path / "model_log.log").write_text(GPU_LOG)
    reason = load_failure(tmp_path, "sentiment")
    assert reason.startswith("GPU unavailable: TS_REQUIRE_GPU=1") and "too old" in reason
    assert load_failure(tmp_path, "frequency") == "deliberately corrupt archive"
    assert load_failure(tmp_path, "senti") is None  # a model named like another's prefix
    assert load_failure(tmp_path / "absent", "sentiment") is None
    # Only the end of a big log is read; the failure there is still found.
    (tmp_path / "model_log.log").write_text(f"{W} x\n" * 50_000 + GPU_LOG)
    assert load_failure(tmp_path, "sentiment", tail_bytes=4096).startswith("GPU unavailable")
    monkeypatch.delenv("LOG_LOCATION", raising=False)
    assert log_dir(tmp_path) == tmp_path / "logs"
    monkeypatch.setenv("LOG_LOCATION", "/home/model-server/work/logs")
    assert str(log_dir(tmp_path)) == "/home/model-server/work/logs"


def _probe_module():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "docker" / "probe.py"
    spec = importlib.util.spec_from_file_location("pod_probe", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readiness_probe_says_why_a_gpu_replica_is_not_ready(tmp_path, monkeypatch, capsys):
    """What `kubectl describe pod` shows for a GPU replica without its GPU: the probe's output."""
    probe = _probe_module()
    (tmp_path / "config.properties").write_text("load_models=sentiment.mar,frequency.mar\n")
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "model_log.log").write_text(GPU_LOG)
    monkeypatch.delenv("LOG_LOCATION", raising=False)
    monkeypatch.setattr(probe, "check_ping", lambda args: None)
    answers = {"sentiment": [{"status": "UNLOADING"}], "frequency": [{"status": "READY"}]}

    def authorized(url, kind, args):
        model = url.rsplit("/", 1)[1]
        return 200, json.dumps([{"workers": answers[model]}]).encode()

    monkeypatch.setattr(probe, "authorized", authorized)
    assert probe.main(["ready", "--workdir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert (
        "sentiment: no READY worker yet (['UNLOADING']); last load failure: GPU unavailable" in err
    )
    assert "too old" in err
    answers["sentiment"] = [{"status": "READY"}]
    assert probe.main(["ready", "--workdir", str(tmp_path)]) == 0


def test_wait_ready_quotes_the_load_failure_when_it_gives_up(tmp_path, monkeypatch):
    import pytest

    from deploy import serving

    (tmp_path / "model_log.log").write_text(GPU_LOG)
    write_keys(tmp_path / "key_file.json")
    monkeypatch.setattr(serving, "model_status", lambda *a: [{"workers": []}])
    with pytest.raises(TimeoutError, match="sentiment: \\[\\]; last load failure: GPU unavailable"):
        serving.wait_ready("http://x", tmp_path, ["sentiment"], timeout=0.2, logs=tmp_path)


def test_a_servers_java_tmpdir_is_its_own_and_fits_a_worker_socket_wherever_tmp_is(
    tmp_path, monkeypatch
):
    import tempfile

    from deploy.local_door import torchserve_config
    from deploy.ts_files import AF_UNIX_PATH_MAX, java_tmpdir, parse_properties

    assert java_tmpdir(tmp_path / "a") != java_tmpdir(tmp_path / "b")
    assert java_tmpdir(tmp_path / "a") == java_tmpdir(tmp_path / "a" / ".." / "a")
    # A temp folder too deep for `<folder>/.ts.sock.<port>` (a test session's own): Java's /tmp.
    deep = tmp_path.joinpath(*["a-rather-long-temp-folder"] * 4)
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    folder = java_tmpdir(tmp_path / "a")
    assert folder.parent == Path("/tmp")
    assert len(str(folder / ".ts.sock.65535").encode()) <= AF_UNIX_PATH_MAX
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert java_tmpdir(tmp_path / "a").parent == tmp_path
    # `make serve`'s TorchServe unpacks archives there: vmargs names it after the configured ones.
    base = "vmargs=-XX:TieredStopAtLevel=1\ninference_address=http://0.0.0.0:8080\n"
    props = parse_properties(torchserve_config(base, java_tmp=folder))
    assert props["vmargs"] == f"-XX:TieredStopAtLevel=1 -Djava.io.tmpdir={folder}"
    assert props["inference_address"] == "http://127.0.0.1:8090"
