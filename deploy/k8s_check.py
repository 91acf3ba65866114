"""Render every Kubernetes overlay and k8s/scoring, and check them: schemas (strict) and,
optionally, checkov.

    python -m deploy.k8s_check [--out build/k8s] [--checkov .venv-checkov/bin/checkov]

First it refreshes k8s/base/config/config.properties from the repository's config.properties (the
one source; kustomize reads only files inside the kustomization root, so the base holds a copy)
and k8s/components/rollout/nginx.conf, the pods' mirror, from deploy/mirror.py.
Rendering is plain `kubectl kustomize`, as Argo CD, Flux and `kubectl apply -k` do it.
kubernetes-validate ships its schemas, so validation works offline; strict mode rejects fields a
schema does not know (a typo in a probe or securityContext would otherwise pass silently). Custom
resources are checked by their own models and counted apart: KEDA's ScaledObject by
deploy/k8s_crds.py, the scoring job's KubeRay RayJob by deploy/kuberay.py, Argo Rollouts' Rollout
and AnalysisTemplate against the controller's own CRD schemas by deploy/argo_rollouts.py.
It prints a summary and the details of failures only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import kubernetes_validate
import yaml

from deploy import argo_rollouts, k8s_crds, kuberay, mirror

ROOT = Path(__file__).resolve().parents[1]
OVERLAYS = ROOT / "k8s" / "overlays"
SCORING = ROOT / "k8s" / "scoring"
"""The offline scoring job (docs/scoring.md): a kustomization of its own, beside the overlays."""
CONFIG, CONFIG_COPY = (
    ROOT / "config.properties",
    ROOT / "k8s" / "base" / "config" / "config.properties",
)
MIRROR_CONFIG = ROOT / "k8s" / "components" / "rollout" / "nginx.conf"
"""The rollout component's nginx config, rendered by deploy/mirror.py (its one source)."""
# The oldest Kubernetes still supported by the cloud providers' managed offerings we target, and
# the newest schema kubernetes-validate ships (it has 1.25 .. 1.37 offline).
K8S_VERSIONS = ("1.30.0", "1.37.0")


@dataclass(frozen=True)
class Rendered:
    overlay: str
    text: str

    @property
    def objects(self) -> list[dict]:
        return [doc for doc in yaml.safe_load_all(self.text) if doc]


def overlays() -> list[str]:
    return sorted(p.name for p in OVERLAYS.iterdir() if (p / "kustomization.yaml").is_file())


def kustomizations() -> dict[str, Path]:
    """What `make k8s` renders: each overlay by its name, and the scoring job as `scoring`."""
    return {name: OVERLAYS / name for name in overlays()} | {"scoring": SCORING}


def is_custom(obj: dict) -> bool:
    return k8s_crds.is_custom(obj) or kuberay.is_rayjob(obj) or argo_rollouts.is_argo(obj)


def custom_label(obj: dict) -> str:
    if kuberay.is_rayjob(obj):
        return "ray.io/v1 RayJob (KubeRay CRD fields, deploy/kuberay.py)"
    if argo_rollouts.is_argo(obj):
        return argo_rollouts.label(obj)
    return k8s_crds.label(obj)


def custom_errors(obj: dict) -> list[str]:
    if kuberay.is_rayjob(obj):
        return kuberay.errors(obj)
    if argo_rollouts.is_argo(obj):
        return argo_rollouts.errors(obj)
    return k8s_crds.errors(obj)


def kubectl() -> str:
    """The kubectl on PATH, else the one `make install` put beside this venv's python (the pinned
    wheel of requirements-kubectl.txt, where Debian packages none): no activation needed."""
    beside = Path(sys.executable).with_name("kubectl")
    found = shutil.which("kubectl") or (str(beside) if os.access(beside, os.X_OK) else None)
    if found is None:
        raise RuntimeError("no kubectl on PATH nor in the venv: run make install")
    return found


def render(overlay: str) -> Rendered:
    """An overlay by its name, or `scoring` (kustomizations())."""
    out = subprocess.run(
        [kubectl(), "kustomize", str(kustomizations().get(overlay, OVERLAYS / overlay))],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise RuntimeError(f"kubectl kustomize {overlay} failed:\n{out.stderr}")
    return Rendered(overlay, out.stdout)


def sync_config() -> bool:
    """Copy config.properties where the base kustomization reads it; True if it changed."""
    if CONFIG_COPY.exists() and CONFIG_COPY.read_bytes() == CONFIG.read_bytes():
        return False
    shutil.copyfile(CONFIG, CONFIG_COPY)
    return True


def sync_mirror_config() -> bool:
    """Write the serving pods' nginx mirror config (deploy/mirror.py k8s_config) where the rollout
    component's ConfigMap reads it; True if it changed."""
    text = mirror.k8s_config()
    if MIRROR_CONFIG.exists() and MIRROR_CONFIG.read_text() == text:
        return False
    MIRROR_CONFIG.write_text(text)
    return True


def object_name(rendered: Rendered, obj: dict) -> str:
    return f"{rendered.overlay}: {obj.get('kind')}/{obj.get('metadata', {}).get('name')}"


def schema_errors(rendered: Rendered, versions: tuple[str, ...] = K8S_VERSIONS) -> list[str]:
    errors = []
    for obj in rendered.objects:
        name = object_name(rendered, obj)
        if is_custom(obj):
            errors += [f"{name} ({custom_label(obj)}): {e}" for e in custom_errors(obj)]
            continue
        for version in versions:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except (
                kubernetes_validate.ValidationError,
                kubernetes_validate.SchemaNotFoundError,
            ) as e:
                errors.append(f"{name} (k8s {version}): {getattr(e, 'message', e)}")
    return errors


def run_checkov(checkov: str, files: list[Path]) -> tuple[list[str], bool]:
    """checkov over the rendered manifests, then the Dockerfiles: summary lines and failed?

    Skips carry their reasons in the repository (annotations, comments) and are listed with them."""
    # No network here: do not fetch Prisma Cloud's guideline mappings.
    env = os.environ | {"BC_SKIP_MAPPING": "TRUE"}
    k8s = [checkov, "-o", "json", "--framework", "kubernetes"] + [
        a for f in files for a in ("-f", str(f))
    ]
    docker = [checkov, "-o", "json", "--framework", "dockerfile", "-d", str(ROOT / "docker")]
    lines, failed = [], False
    for cmd in (k8s, docker):
        out = subprocess.run(cmd, env=env, capture_output=True, text=True)
        try:
            reports = json.loads(out.stdout)
        except json.JSONDecodeError:
            lines.append(
                f"checkov {cmd[4]}: no report (exit {out.returncode}):\n{out.stderr[-2000:]}"
            )
            failed = True
            continue
        for report in reports if isinstance(reports, list) else [reports]:
            lines += checkov_summary(report)
            failed |= report.get("summary", {}).get("failed", 0) > 0
    return lines, failed


def checkov_summary(report: dict) -> list[str]:
    summary, results = report.get("summary", {}), report.get("results", {})
    lines = [
        f"checkov {report.get('check_type')}: {summary.get('passed', 0)} passed, "
        f"{summary.get('failed', 0)} failed, {summary.get('skipped', 0)} skipped "
        f"over {summary.get('resource_count', 0)} resources"
    ]
    for check in results.get("failed_checks", []):
        lines.append(
            f"  FAILED {check['check_id']} {check['check_name']}: {check['resource']} "
            f"({check.get('file_path')}:{check.get('file_line_range')})"
        )
    skipped: dict[tuple[str, str], int] = {}
    for check in results.get("skipped_checks", []):
        reason = (check.get("check_result") or {}).get("suppress_comment", "")
        skipped.setdefault((check["check_id"], reason), 0)
        skipped[(check["check_id"], reason)] += 1
    for (check_id, reason), n in sorted(skipped.items()):
        lines.append(f"  skipped {check_id} x{n}: {reason}")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--out", type=Path, default=ROOT / "build" / "k8s", help="rendered YAML goes here"
    )
    p.add_argument("--checkov", help="checkov executable; omitted: schemas only")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if sync_config():
        print(f"{CONFIG_COPY.relative_to(ROOT)}: refreshed from config.properties (commit it)")
    if sync_mirror_config():
        print(f"{MIRROR_CONFIG.relative_to(ROOT)}: refreshed from deploy/mirror.py (commit it)")
    files, failed = [], False
    for overlay in kustomizations():
        rendered = render(overlay)
        path = args.out / f"{overlay}.yaml"
        path.write_text(rendered.text)
        files.append(path)
        errors = schema_errors(rendered)
        shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path  # --out anywhere
        custom = [o for o in rendered.objects if is_custom(o)]
        builtin = len(rendered.objects) - len(custom)
        print(
            f"{overlay}: {len(rendered.objects)} objects -> {shown}; "
            f"{builtin} against Kubernetes {', '.join(K8S_VERSIONS)} schemas (strict), "
            f"{len(custom)} custom: "
            + (", ".join(f"{o['kind']} ({custom_label(o)})" for o in custom) or "none")
            + f"; {len(errors)} schema errors"
        )
        for e in errors:
            print(f"  SCHEMA {e}")
        failed |= bool(errors)
    if args.checkov:
        lines, checkov_failed = run_checkov(args.checkov, files)
        print("\n".join(lines))
        failed |= checkov_failed
    print("k8s check: FAILED" if failed else "k8s check: OK")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
