"""Strict checks for the custom resources the overlays use, which kubernetes-validate does not know.

KEDA's ScaledObject is validated against the KEDA 2.16 models generated from its CRD
(cloudcoil-models-keda, pydantic): types and required fields by the model, unknown fields by a
round trip (the model keeps only fields the CRD declares, so anything lost is unknown, as a strict
kubectl apply would report it). The Prometheus trigger's metadata is a free string map in the CRD;
the keys and values KEDA's Prometheus scaler reads are checked here.
"""

from __future__ import annotations

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


def is_custom(obj: dict) -> bool:
    return (obj.get("apiVersion"), obj.get("kind")) in MODELS


def label(obj: dict) -> str:
    return f"{obj.get('apiVersion')} {obj.get('kind')} (KEDA {KEDA_VERSION} CRD models)"


def errors(obj: dict) -> list[str]:
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
