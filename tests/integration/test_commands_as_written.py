"""The commands a newcomer types, as written in README.md, from a checkout with tiny models.

Each runs in its own network namespace (tests/support/checkout.py), so this repository's
config.properties serves on its documented addresses, 127.0.0.1:8080 and the rest.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.checkout import ShellError
from tools import registry

pytestmark = pytest.mark.integration

PREDICT = "python -m clients predict sentiment --text 'A warm, funny film'"
JAVA_TMPDIR = (
    ".venv/bin/python -c 'from deploy.ts_files import java_tmpdir; print(java_tmpdir(\".\"))'"
)
PORT_CLOSED = """
for i in $(seq 150); do curl -s -o /dev/null http://127.0.0.1:8080/ping || break; sleep 0.2; done
if curl -s -o /dev/null http://127.0.0.1:8080/ping; then echo "still listening"; false; fi
"""


def test_torchserve_start_as_written_serves_both_models_and_stop_stops_it(shell, checkout):
    shell.run(
        "make install && source .venv/bin/activate && make archive && torchserve --start",
        "README: make install && source .venv/bin/activate && make archive && torchserve --start",
    )
    shell.run("python -m deploy.wait_ready --timeout 180 sentiment frequency", "wait", 200)
    answer = json.loads(shell.run(PREDICT, "predict sentiment"))
    assert answer["label"] in ("positive", "negative")
    assert answer["model"]["name"] == "sentiment"
    answer = json.loads(
        shell.run(
            "python -m clients predict frequency --synthetic 500 --frequencies 1,3",
            "predict frequency",
        )
    )
    assert [c["frequency"] for c in answer["components"]] == [1.0, 3.0]
    # Token authorization as configured: the key file is in the checkout, a bare call is refused.
    assert (checkout / "key_file.json").exists()
    status = shell.run(
        "curl -s -o /dev/null -w '%{http_code}' -d x http://127.0.0.1:8080/predictions/sentiment"
    )
    assert status.strip() == "400"  # TorchServe 0.12: InvalidKeyException
    # A missing key file is named, with where it was looked for.
    out = shell.run("python -m clients health --key-file nowhere/key_file.json 2>&1 || true")
    assert "nowhere/key_file.json does not exist" in out, out
    # `torchserve --stop` stops it, typed from any folder.
    shell.run("cd ~ && torchserve --stop && cd - >/dev/null", "torchserve --stop")
    shell.run(PORT_CLOSED, "TorchServe stopped listening", 60)
    assert not (checkout / "key_file.json").exists()


def test_torchserve_start_from_another_folder_uses_the_checkout(shell, checkout):
    shell.run("source .venv/bin/activate && cd ~ && torchserve --start", "start from $HOME")
    shell.run(
        f"cd {checkout} && python -m deploy.wait_ready --timeout 180 {' '.join(registry.names())}"
    )
    assert (checkout / "key_file.json").exists()
    assert (checkout / "logs" / "ts_log.log").exists()
    shell.run("torchserve --stop")
    shell.run(PORT_CLOSED, "TorchServe stopped listening", 60)
    out = shell.run('deactivate; echo "config=${TS_CONFIG_FILE:-none} $(type -t torchserve)"')
    assert out.strip() == "config=none", out


def test_make_serve_through_a_pipe_returns_once_models_are_ready(shell, checkout):
    out = shell.run("make serve | tee serve.log", "make serve | tee serve.log", 240)
    assert f"ready: {', '.join(registry.names())} at http://127.0.0.1:8080" in out
    # The server's own output went to logs/, not to the pipe.
    assert "ready:" in (checkout / "serve.log").read_text()
    assert "Torchserve version" in (checkout / "logs" / "torchserve.out").read_text()
    # Before the first request there are no handler metrics, and `make metrics` says so.
    assert "no handler metrics yet" in shell.run("make -s metrics", "make metrics, no request yet")
    shell.run(PREDICT + " >/dev/null", "a prediction after make serve")
    assert "ts_handler_batch_size" in shell.run("make -s metrics", "make metrics after a request")
    # TorchServe unpacked each archive into a java.io.tmpdir of this checkout's own, never /tmp's
    # shared one, and `make stop` removes it: a stopped server leaves no unpacked archives behind.
    # (The session's TMPDIR is too deep for a worker socket: the folder is under /tmp.)
    java_tmp = Path(shell.run(JAVA_TMPDIR, "the checkout's java.io.tmpdir").strip())
    assert java_tmp.name.startswith("ts-java-"), java_tmp
    assert len(list((java_tmp / "models").iterdir())) == len(registry.names())
    shell.run("make stop", "make stop")
    shell.run(PORT_CLOSED, "TorchServe stopped listening", 60)
    assert not java_tmp.exists()


def test_make_serve_fails_at_once_with_the_log_when_torchserve_cannot_start(shell):
    # `make serve` runs TorchServe's REST listener on 8090, behind the door on 8080.
    shell.run("python3 -m http.server 8090 --bind 127.0.0.1 >/dev/null 2>&1 & sleep 1", "take 8090")
    # The door it started in front (8080) must be gone too: a door left behind holds 8080, and the
    # next `make serve` would fail on a port its own earlier run took.
    after = (
        "if curl -s -o /dev/null http://127.0.0.1:8080/; then echo DOOR-STILL-RUNNING; "
        "else echo DOOR-STOPPED; fi; (exit $rc)"
    )
    with pytest.raises(ShellError) as failed:
        shell.run(f"rc=0; make serve || rc=$?; {after}", "make serve with 8090 taken", 120)
    assert "failed (exit" in str(failed.value)  # it ended by itself, not by our timeout
    assert "TorchServe exited before" in str(failed.value)
    assert "logs/torchserve.out, last lines" in str(failed.value)
    assert "DOOR-STOPPED" in printed(failed.value)


def test_make_serve_fails_at_once_when_its_door_cannot_listen_and_leaves_nothing_running(shell):
    shell.run("python3 -m http.server 8080 --bind 127.0.0.1 >/dev/null 2>&1 & sleep 1", "take 8080")
    # TorchServe (its management port, 8081) must be gone when `make serve` has failed.
    after = (
        "for i in $(seq 150); do curl -s -o /dev/null http://127.0.0.1:8081/ || break; "
        "sleep 0.2; done; if curl -s -o /dev/null http://127.0.0.1:8081/; "
        "then echo TS-STILL-RUNNING; else echo TS-STOPPED; fi; (exit $rc)"
    )
    with pytest.raises(ShellError) as failed:
        shell.run(f"rc=0; make serve || rc=$?; {after}", "make serve with 8080 taken", 180)
    assert "failed (exit" in str(failed.value)
    assert "8080 is taken by another server" in str(failed.value)
    assert "TS-STOPPED" in printed(failed.value)


def printed(error: ShellError) -> str:
    """What the failed script printed (the error's text also quotes the script itself, whose
    `echo` of a verdict would match any verdict)."""
    return str(error).split("\n--- output\n", 1)[1]
