"""Strict checks for the custom resources the overlays use, which kubernetes-validate does not know.

KServe's InferenceService and ServingRuntime are checked by deploy/kserve_crds.py against the
models of KServe's own SDK (the `kserve` package, in .venv-oip), the same way: types and required
fields by the models, fields no model declares as errors.

KEDA's ScaledObject is validated against the KEDA 2.16 models generated from its CRD
(cloudcoil-models-keda, pydantic): types and required fields by the model, unknown fields by a
round trip (the model keeps only fields the CRD declares, so anything lost is unknown, as a strict
kubectl apply would report it). The Prometheus trigger's metadata is a free string map in the CRD;
the keys and values KEDA's Prometheus scaler reads are checked here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pydantic
from cloudcoil.models.keda import v1alpha1 as keda

KEDA_VERSION = "2.16"
MODELS = {("keda.sh/v1alpha1", "ScaledObject"): keda.ScaledObject}
PROMETHEUS_REQUIRED = {"serverAddress", "query", "threshold"}
PROMETHEUS_KEYS = PROMETHEUS_REQUIRED | {
    "activationThreshold",
    "namespace",
    "customHeaders",
    "ignoreNullValues",
    "queryParameters",
    "unsafeSsl",
    "authModes",
}


ROOT = Path(__file__).resolve().parents[1]
OIP_PYTHON = ROOT / ".venv-oip" / "bin" / "python"
KSERVE_KINDS = {
    ("serving.kserve.io/v1beta1", "InferenceService"),
    ("serving.kserve.io/v1alpha1", "ServingRuntime"),
    ("serving.kserve.io/v1alpha1", "ClusterServingRuntime"),
}
"""KServe's kinds: checked by deploy/kserve_crds.py against KServe's own SDK models, in .venv-oip
(KServe pins protobuf<7, so its package cannot live in this venv)."""


def kserve_version() -> str:
    """The KServe release whose SDK models check its kinds (requirements-oip.txt's pin)."""
    text = (ROOT / "requirements-oip.txt").read_text()
    found = re.search(r"^kserve==(\S+)", text, re.M)
    return found[1] if found else "?"


def is_kserve(obj: dict) -> bool:
    return (obj.get("apiVersion"), obj.get("kind")) in KSERVE_KINDS


def is_custom(obj: dict) -> bool:
    return (obj.get("apiVersion"), obj.get("kind")) in MODELS or is_kserve(obj)


def label(obj: dict) -> str:
    if is_kserve(obj):
        return f"{obj.get('apiVersion')} {obj.get('kind')} (KServe {kserve_version()} SDK models)"
    return f"{obj.get('apiVersion')} {obj.get('kind')} (KEDA {KEDA_VERSION} CRD models)"


def kserve_errors(objects: list[dict]) -> list[list[str]]:
    """Each KServe object's errors, from deploy/kserve_crds.py run in .venv-oip."""
    if not OIP_PYTHON.exists():
        raise RuntimeError(f"no {OIP_PYTHON}: run make install (it builds the OIP server's venv)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [str(OIP_PYTHON), "-m", "deploy.kserve_crds"],
        input=json.dumps(objects),
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    if done.returncode != 0:
        raise RuntimeError(f"deploy.kserve_crds failed:\n{done.stderr[-3000:]}")
    return list(json.loads(done.stdout)["errors"])


def errors(obj: dict) -> list[str]:
    if is_kserve(obj):
        return kserve_errors([obj])[0]
    model = MODELS[(obj["apiVersion"], obj["kind"])]
    try:
        parsed = model.model_validate(obj)
    except pydantic.ValidationError as e:
        return [f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors()]
    found = unknown(obj, parsed.model_dump(by_alias=True, exclude_unset=True, mode="json"))
    found += [e for t in obj["spec"].get("triggers", []) for e in trigger_errors(t)]
    return found


def unknown(given, kept, path: str = "") -> list[str]:
    """Paths present in `given` but dropped by the model: fields the CRD does not declare."""
    if isinstance(given, dict):
        kept = kept if isinstance(kept, dict) else {}
        out = []
        for key, value in given.items():
            where = f"{path}.{key}" if path else key
            if key not in kept:
                out.append(f"{where}: field not declared by the CRD")
            else:
                out += unknown(value, kept[key], where)
        return out
    if isinstance(given, list) and isinstance(kept, list):
        return [
            e
            for i, (g, k) in enumerate(zip(given, kept, strict=False))
            for e in unknown(g, k, f"{path}[{i}]")
        ]
    return []


def trigger_errors(trigger: dict) -> list[str]:
    if trigger.get("type") != "prometheus":
        return []
    meta = trigger.get("metadata", {})
    out = [f"prometheus trigger: missing {k}" for k in sorted(PROMETHEUS_REQUIRED - meta.keys())]
    out += [f"prometheus trigger: unknown key {k}" for k in sorted(meta.keys() - PROMETHEUS_KEYS)]
    for key in ("threshold", "activationThreshold"):
        if key in meta:
            try:
                float(meta[key])
            except ValueError:
                out.append(f"prometheus trigger: {key}={meta[key]!r} is not a number")
    return out
