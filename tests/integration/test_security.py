"""Intruders: no token, a wrong token, model or workflow registration, secrets in worker env,
listeners beyond loopback, archives that do not match their manifest."""

from __future__ import annotations

import stat
from urllib.parse import urlparse

import pytest
import requests

from deploy.serving import read_properties
from reliability.archives import workflow_archive
from reliability.bodies import valid_example
from reliability.probes import process_environment, workers
from reliability.record import record
from tests.support.torchserve import ROOT, start_torchserve

pytestmark = pytest.mark.integration

SECRETS = {
    "AWS_SECRET_ACCESS_KEY": "reliability-canary-aws-secret",
    "AWS_ACCESS_KEY_ID": "reliability-canary-aws-id",
    "HF_TOKEN": "reliability-canary-hf-token",
    "DB_PASSWORD": "reliability-canary-password",
}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def refused_for_token(r: requests.Response) -> bool:
    """0.12 answers a missing or wrong token with 400 InvalidKeyException, not 401."""
    return r.status_code == 400 and r.json().get("type") == "InvalidKeyException"


# --- tokens (the shared server) ---------------------------------------------------------------


@pytest.mark.parametrize(
    "token", [None, "wrong-token", "management"], ids=["none", "wrong", "management-key"]
)
def test_inference_without_the_inference_token_is_refused(fuzz_target, token):
    server, model = fuzz_target.server, fuzz_target.models[0]
    headers = {} if token is None else bearer(server.keys.get(token, token))
    r = requests.post(
        f"{server.inference_url}/predictions/{model}",
        json=valid_example(model),
        headers=headers,
        timeout=30,
    )
    assert refused_for_token(r), (r.status_code, r.text[:200])
    assert set(r.json()) == {"code", "type", "message"}, "a refused call must carry no prediction"


@pytest.mark.parametrize(
    "token", [None, "wrong-token", "inference"], ids=["none", "wrong", "inference-key"]
)
def test_management_without_the_management_token_is_refused(fuzz_target, token):
    server, model = fuzz_target.server, fuzz_target.models[0]
    headers = {} if token is None else bearer(server.keys.get(token, token))
    for method, path in (
        ("GET", "/models"),
        ("GET", f"/models/{model}"),
        ("PUT", f"/models/{model}?min_worker=0"),
    ):
        r = requests.request(method, f"{server.management_url}{path}", headers=headers, timeout=30)
        assert refused_for_token(r), (method, path, r.status_code, r.text[:200])
    # ...and the refused scale-down did not happen.
    assert workers(server.management_url, server.keys["management"], model)


def test_key_file_is_readable_by_its_owner_only(fuzz_target):
    mode = stat.S_IMODE((fuzz_target.server.workdir / "key_file.json").stat().st_mode)
    assert mode == 0o600, oct(mode)


def test_model_registration_over_management_api_is_off(fuzz_target):
    server, model = fuzz_target.server, fuzz_target.models[0]
    key = server.keys["management"]
    for url in (
        f"{model}.mar",
        "http://169.254.169.254/latest/meta-data/x.mar",
        "file:///etc/passwd",
    ):
        r = requests.post(
            f"{server.management_url}/models", params={"url": url}, headers=bearer(key), timeout=30
        )
        assert r.status_code == 405, (url, r.status_code, r.text[:200])
    r = requests.delete(f"{server.management_url}/models/{model}", headers=bearer(key), timeout=30)
    assert r.status_code == 405
    assert workers(server.management_url, key, model), "the model must still be registered"


# --- workflows and worker environment (dedicated servers) --------------------------------------


@pytest.fixture(scope="module")
def hardened(stand_in_archive, tmp_path_factory):
    """The repository's config as is, started with cloud secrets in the server's environment."""
    server = start_torchserve(
        tmp_path_factory.mktemp("hardened"), {"standin": stand_in_archive}, env=SECRETS
    )
    yield server
    server.stop()


@pytest.fixture(scope="module")
def loosened(stand_in_archive, tmp_path_factory):
    """The control: a real workflow store and no env blacklist. What these allow is what the
    repository's config must stop, and proves the attack bodies below are not duds."""
    tmp = tmp_path_factory.mktemp("loosened")
    workflow_archive(tmp / "workflows" / "intruder.war", "standin.mar")
    server = start_torchserve(
        tmp,
        {"standin": stand_in_archive},
        env=SECRETS,
        overrides={"workflow_store": str(tmp / "workflows"), "blacklist_env_vars": "^NOTHING$"},
    )
    yield server, tmp
    server.stop()


def register_workflow(server, url: str) -> requests.Response:
    return requests.post(
        f"{server.management_url}/workflows",
        params={"url": url},
        headers=server.auth("management"),
        timeout=60,
    )


def listed_workflows(server) -> list[str]:
    r = requests.get(
        f"{server.management_url}/workflows", headers=server.auth("management"), timeout=30
    )
    return [w["workflowName"] for w in r.json()["workflows"]]


def test_control_server_does_register_the_intruders_workflow(loosened):
    server, _ = loosened
    r = register_workflow(server, "intruder.war")
    assert r.status_code == 200, r.text[:300]
    assert "intruder" in listed_workflows(server)


def test_workflow_registration_is_closed(hardened, tmp_path):
    """enable_model_api=false does not cover POST /workflows: the config leaves it nothing to load."""
    war = workflow_archive(tmp_path / "elsewhere" / "intruder.war", "standin.mar")
    attempts = {
        "store name": "intruder.war",
        "absolute file URL": f"file://{war}",
        "traversal": f"file:///nonexistent-allowed-url/../..{war}",
        "relative path": f"../../../..{war}",
        "remote URL": "http://127.0.0.1:9/intruder.war",
    }
    answers = {name: register_workflow(hardened, url) for name, url in attempts.items()}
    assert all(400 <= r.status_code < 500 for r in answers.values()), {
        k: r.text[:120] for k, r in answers.items()
    }
    assert listed_workflows(hardened) == []
    record(
        "workflow_registration",
        attempts=len(attempts),
        statuses={k: r.status_code for k, r in answers.items()},
    )


def test_allowed_urls_refuses_traversal_even_with_a_workflow_store(loosened, tmp_path):
    """Before the regex forbade '..', file:///nonexistent-allowed-url/../../x.war matched it and
    TorchServe downloaded x.war from anywhere on disk."""
    server, _ = loosened
    war = workflow_archive(tmp_path / "elsewhere" / "smuggled.war", "standin.mar")
    for url in (
        f"file:///nonexistent-allowed-url/../..{war}",
        f"file:///nonexistent-allowed-url/%2e%2e/..{war}",
    ):
        r = register_workflow(server, url)
        assert r.status_code == 404 and "allowed URL" in r.json()["message"], (
            url,
            r.status_code,
            r.text[:200],
        )
    assert "smuggled" not in listed_workflows(server)


def worker_env(server, model: str = "standin") -> dict[str, str]:
    [worker] = workers(server.management_url, server.keys["management"], model)
    return process_environment(worker.pid)


def test_workers_do_not_see_secrets_from_the_server_environment(hardened, loosened):
    leaked = {k for k in SECRETS if k in worker_env(hardened)}
    control = {k for k in SECRETS if k in worker_env(loosened[0])}
    record(
        "worker_env",
        secrets_set=sorted(SECRETS),
        leaked=sorted(leaked),
        control_leaked=sorted(control),
    )
    assert control == set(SECRETS), "control: without the blacklist the worker inherits them"
    assert leaked == set(), leaked


def test_management_and_metrics_listen_on_loopback_only():
    props = read_properties(ROOT / "config.properties")
    for key in ("inference_address", "management_address", "metrics_address"):
        assert urlparse(props[key]).hostname == "127.0.0.1", (key, props[key])
    for key in ("grpc_inference_address", "grpc_management_address"):
        assert props[key] == "127.0.0.1", (key, props[key])
    assert props["enable_model_api"] == "false"
    assert props["disable_token_authorization"] == "false"


# --- what TorchServe answers without a token (config.properties as written) -------------------


@pytest.fixture(scope="module")
def as_written(tmp_path_factory, stand_in_archive):
    """`make serve`'s configuration (tokens on) serving one model, on free loopback ports."""
    server = start_torchserve(tmp_path_factory.mktemp("as-written"), {"standin": stand_in_archive})
    yield server
    server.stop()


@pytest.mark.parametrize("listener", ["inference", "management", "metrics"])
def test_without_a_token_torchserve_answers_only_its_api_description_and_metrics(
    as_written, listener
):
    """TorchServe 0.12 answers `OPTIONS /` and `GET /api-description` on every listener before its
    token check, and has no setting to close them (docs/reliability.md, "The surface"): 200 with
    its OpenAPI description, the same document for every install, which names no served model
    and carries no key. Everything else there wants the listener's token; `/metrics` wants none."""
    server = as_written
    url = {
        "inference": server.inference_url,
        "management": server.management_url,
        "metrics": server.metrics_url,
    }[listener]
    for method, path in (("OPTIONS", "/"), ("GET", "/api-description")):
        r = requests.request(method, url + path, timeout=30)
        assert r.status_code == 200, (method, path, r.status_code, r.text[:200])
        doc = r.json()
        assert doc["openapi"].startswith("3.") and doc["paths"], (method, path)
        assert "standin" not in r.text, "the description names a served model"
        assert not any(key in r.text for key in server.keys.values()), "a key in the description"
    if listener == "metrics":
        r = requests.get(f"{url}/metrics", timeout=30)
        assert r.status_code == 200 and "# TYPE" in r.text
    else:
        guarded = "/ping" if listener == "inference" else "/models"
        assert refused_for_token(requests.get(url + guarded, timeout=30)), guarded
        r = requests.options(f"{url}/api-description/x", timeout=30)
        assert r.status_code in (400, 404, 405), "only the two description routes are open"
