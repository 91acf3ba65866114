"""KServe's custom resources (InferenceService, ServingRuntime) checked against the models KServe's
own Python SDK generates from its CRDs' OpenAPI schema: `kserve` 0.21 (requirements-oip.txt), with
the Kubernetes types they embed (V1Container, V1Volume, ...) from the `kubernetes` client it pins.
No schema is fetched or vendored: the SDK is the pip package that ships it.

Each field is walked with its model's `openapi_types` and `attribute_map`: a field no model declares
is an error (as a strict `kubectl apply` reports it), a value of the wrong JSON type is an error, and
each object is built with its model's constructor, which refuses a missing required field.

KServe pins protobuf<7, so it is installed only in .venv-oip: deploy/k8s_crds.py (in .venv) runs
this module there:

    .venv-oip/bin/python -m deploy.kserve_crds < objects.json    # → a JSON list of error lists
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

KINDS = {
    ("serving.kserve.io/v1beta1", "InferenceService"): "V1beta1InferenceService",
    ("serving.kserve.io/v1alpha1", "ServingRuntime"): "V1alpha1ServingRuntime",
    ("serving.kserve.io/v1alpha1", "ClusterServingRuntime"): "V1alpha1ClusterServingRuntime",
}
"""The KServe kinds checked here → their SDK model."""

PRIMITIVES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    "object": (object,),  # IntOrString and free-form values
    "datetime": (str,),
    "date": (str,),
}


def model_class(name: str) -> Any:
    """The SDK model named `name`: KServe's own, else the Kubernetes client's."""
    import kserve.models
    import kubernetes.client

    for module in (kserve.models, kubernetes.client):
        cls = getattr(module, name, None)
        if isinstance(cls, type) and hasattr(cls, "openapi_types"):
            return cls
    return None


def check(value: Any, type_name: str, path: str) -> list[str]:
    """The errors of `value` read as `type_name` (an OpenAPI type of the SDK) at `path`."""
    # KServe's models write list[X] and dict(str, X); the Kubernetes client's, List[X], Dict[str, X].
    if m := re.fullmatch(r"[lL]ist\[(.+)\]", type_name):
        if not isinstance(value, list):
            return [f"{path}: expected a list, got {type(value).__name__}"]
        return [e for i, v in enumerate(value) for e in check(v, m[1], f"{path}[{i}]")]
    if m := re.fullmatch(r"dict\(str, (.+)\)|Dict\[str, (.+)\]", type_name):
        if not isinstance(value, dict):
            return [f"{path}: expected a map, got {type(value).__name__}"]
        item = m[1] or m[2]
        return [e for k, v in value.items() for e in check(v, item, f"{path}.{k}")]
    if type_name in PRIMITIVES:
        numeric = type_name in ("int", "float")
        if not isinstance(value, PRIMITIVES[type_name]) or (numeric and isinstance(value, bool)):
            return [f"{path}: expected {type_name}, got {type(value).__name__} {value!r}"]
        return []
    cls = model_class(type_name)
    if cls is None:
        return [f"{path}: type {type_name} is in neither the KServe nor the Kubernetes models"]
    if not isinstance(value, dict):
        return [f"{path}: expected an object ({type_name}), got {type(value).__name__}"]
    by_key = {key: attr for attr, key in cls.attribute_map.items()}
    errors: list[str] = []
    given: dict[str, Any] = {}
    for key, item in value.items():
        attr = by_key.get(key)
        if attr is None:
            errors.append(f"{path}.{key}: field not declared by the CRD ({type_name})")
            continue
        errors += check(item, cls.openapi_types[attr], f"{path}.{key}")
        given[attr] = item
    try:
        cls(**given)  # the model's own checks: required fields, allowed values
    except (ValueError, TypeError) as e:
        errors.append(f"{path or type_name}: {e}")
    return errors


def errors(obj: dict) -> list[str]:
    """The errors of one KServe object (a kind of KINDS)."""
    name = KINDS.get((obj.get("apiVersion"), obj.get("kind")))  # type: ignore[arg-type]
    if name is None:
        return [f"{obj.get('apiVersion')} {obj.get('kind')}: not a KServe kind checked here"]
    found = check(obj, name, "")
    return [e.lstrip(".") for e in found]


def version() -> str:
    from importlib.metadata import version as installed

    return installed("kserve")


def main() -> int:
    objects = json.load(sys.stdin)
    json.dump({"kserve": version(), "errors": [errors(o) for o in objects]}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
