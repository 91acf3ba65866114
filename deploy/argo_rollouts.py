"""Strict checks for Argo Rollouts' `Rollout` and `AnalysisTemplate` against the controller's own
CRDs, vendored from its repository at a release tag (deploy/crds/argo-rollouts/SOURCE.md).

Each CRD's `openAPIV3Schema` is a structural schema: the API server prunes, or with strict field
validation rejects, any field a `properties` block does not declare, unless the schema says
`x-kubernetes-preserve-unknown-fields`. jsonschema knows nothing of that rule, so the schema is
tightened first (`additionalProperties: false` wherever the API server would reject an unknown
field), and `x-kubernetes-int-or-string` becomes "an integer or a string". Errors name the field's
path (`spec.strategy.canary.steps[0].setWeight: ...`).
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

VERSION = "v1.9.1"
CRDS = Path(__file__).resolve().parent / "crds" / "argo-rollouts"
FILES = {
    ("argoproj.io/v1alpha1", "Rollout"): (
        "rollout-crd.yaml",
        "d79c0dab9bb386b1c9329fb69cf0d843fff2152b3f7916839755c1aabc7387f5",
    ),
    ("argoproj.io/v1alpha1", "AnalysisTemplate"): (
        "analysis-template-crd.yaml",
        "96a871705477bb8876f91630789ce753c8291f0ff5457a8cbc781ff150522369",
    ),
}


def is_argo(obj: dict) -> bool:
    return (obj.get("apiVersion"), obj.get("kind")) in FILES


def label(obj: dict) -> str:
    return f"{obj.get('apiVersion')} {obj.get('kind')} (Argo Rollouts {VERSION} CRD schema)"


def strict(schema: Any) -> Any:
    """The schema as the API server applies it with strict field validation."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict(v) for k, v in schema.items()}
    if out.pop("x-kubernetes-int-or-string", False):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if out.get("x-kubernetes-preserve-unknown-fields"):
        return out
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


@cache
def schema(api_version: str, kind: str) -> dict:
    """The CRD's served version's openAPIV3Schema, tightened; the vendored file's hash checked."""
    name, sha256 = FILES[(api_version, kind)]
    data = (CRDS / name).read_bytes()
    if hashlib.sha256(data).hexdigest() != sha256:
        raise RuntimeError(f"{CRDS / name}: sha256 differs from the pinned {VERSION} file")
    crd = yaml.safe_load(data)
    version = api_version.split("/")[1]
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    root = strict(served["schema"]["openAPIV3Schema"])
    # Every object has these; the CRD leaves metadata to the API server's ObjectMeta.
    root["properties"].setdefault("apiVersion", {"type": "string"})
    root["properties"].setdefault("kind", {"type": "string"})
    return root


def path_of(error: jsonschema.ValidationError) -> str:
    out = ""
    for part in error.absolute_path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(object)"


def errors(obj: dict) -> list[str]:
    """One line per schema violation, each naming the field's path."""
    validator = jsonschema.Draft7Validator(schema(obj["apiVersion"], obj["kind"]))
    found = sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path)))
    return [f"{path_of(e)}: {e.message}" for e in found]
