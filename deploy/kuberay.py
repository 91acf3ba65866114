"""Strict checks of the KubeRay RayJob in k8s/scoring (ray.io/v1).

No package on PyPI ships KubeRay's CRD or models generated from it (as cloudcoil-models-keda does
for KEDA), and nothing is fetched at run time: the RayJob fields the manifest may use are declared
here as pydantic models after the ray.io/v1 CRD (unknown fields refused, types and enums checked),
and each group's pod template is validated by kubernetes-validate as a core v1 PodTemplate.
"""

from __future__ import annotations

from typing import Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Metadata(_Strict):
    name: str
    namespace: str | None = None
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}


class HeadGroupSpec(_Strict):
    rayStartParams: dict[str, str] = {}
    template: dict
    serviceType: Literal["ClusterIP", "NodePort", "LoadBalancer"] | None = None


class WorkerGroupSpec(_Strict):
    groupName: str
    replicas: int = Field(ge=0)
    minReplicas: int = Field(ge=0)
    maxReplicas: int = Field(ge=0)
    rayStartParams: dict[str, str] = {}
    template: dict


class RayClusterSpec(_Strict):
    rayVersion: str
    enableInTreeAutoscaling: bool | None = None
    headGroupSpec: HeadGroupSpec
    workerGroupSpecs: list[WorkerGroupSpec] = []


class RayJobSpec(_Strict):
    entrypoint: str = Field(min_length=1)
    shutdownAfterJobFinishes: bool | None = None
    ttlSecondsAfterFinished: int | None = Field(default=None, ge=0)
    activeDeadlineSeconds: int | None = Field(default=None, ge=1)
    backoffLimit: int | None = Field(default=None, ge=0)
    submissionMode: Literal["K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode"] | None = (
        None
    )
    runtimeEnvYAML: str | None = None
    rayClusterSpec: RayClusterSpec


class RayJob(_Strict):
    apiVersion: Literal["ray.io/v1"]
    kind: Literal["RayJob"]
    metadata: Metadata
    spec: RayJobSpec


def is_rayjob(obj: dict) -> bool:
    return (obj.get("apiVersion"), obj.get("kind")) == ("ray.io/v1", "RayJob")


def errors(obj: dict, k8s_version: str = "1.37") -> list[str]:
    """What a strict apply of this RayJob would refuse ([] when none)."""
    import kubernetes_validate

    try:
        job = RayJob.model_validate(obj)
    except pydantic.ValidationError as e:
        return [f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors()]
    out = []
    cluster = job.spec.rayClusterSpec
    groups = [("head", cluster.headGroupSpec.template)]
    groups += [(g.groupName, g.template) for g in cluster.workerGroupSpecs]
    for name, template in groups:
        pod = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": name},
               "template": template}  # fmt: skip
        try:
            kubernetes_validate.validate(pod, k8s_version, strict=True)
        except kubernetes_validate.ValidationError as e:
            out.append(f"{name} pod template: {e.message}")
    for g in cluster.workerGroupSpecs:
        if not g.minReplicas <= g.replicas <= g.maxReplicas:
            out.append(f"{g.groupName}: replicas not within minReplicas..maxReplicas")
    return out
