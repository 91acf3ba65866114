"""Render every Kubernetes overlay and check it: schemas (strict) and, optionally, checkov.

    python -m deploy.k8s_check [--out build/k8s] [--checkov .venv-checkov/bin/checkov]

Rendering is `kubectl kustomize --load-restrictor LoadRestrictionsNone`, because the base generates
its ConfigMap from the repository's own config.properties, outside the kustomization root.
kubernetes-validate ships its schemas, so validation works offline; strict mode rejects fields a
schema does not know (a typo in a probe or securityContext would otherwise pass silently).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import kubernetes_validate
import yaml

ROOT = Path(__file__).resolve().parents[1]
OVERLAYS = ROOT / "k8s" / "overlays"
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


def render(overlay: str) -> Rendered:
    out = subprocess.run(
        ["kubectl", "kustomize", str(OVERLAYS / overlay)],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise RuntimeError(f"kubectl kustomize {overlay} failed:\n{out.stderr}")
    return Rendered(overlay, out.stdout)


def schema_errors(rendered: Rendered, versions: tuple[str, ...] = K8S_VERSIONS) -> list[str]:
    errors = []
    for obj in rendered.objects:
        name = f"{rendered.overlay}: {obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
        for version in versions:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except (
                kubernetes_validate.ValidationError,
                kubernetes_validate.SchemaNotFoundError,
            ) as e:
                errors.append(f"{name} (k8s {version}): {getattr(e, 'message', e)}")
    return errors


def run_checkov(checkov: str, files: list[Path]) -> int:
    """checkov over the rendered manifests, then the Dockerfiles; skips carry reasons in the repo."""
    # No network here: do not fetch Prisma Cloud's guideline mappings.
    env = os.environ | {"BC_SKIP_MAPPING": "TRUE"}
    k8s = [checkov, "--compact", "--framework", "kubernetes"] + [
        a for f in files for a in ("-f", str(f))
    ]
    docker = [checkov, "--compact", "--framework", "dockerfile", "-d", str(ROOT / "docker")]
    codes = [subprocess.run(cmd, env=env).returncode for cmd in (k8s, docker)]
    return max(codes)


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
    files, failed = [], False
    for overlay in overlays():
        rendered = render(overlay)
        path = args.out / f"{overlay}.yaml"
        path.write_text(rendered.text)
        files.append(path)
        errors = schema_errors(rendered)
        kinds = ", ".join(f"{o['kind']}/{o['metadata']['name']}" for o in rendered.objects)
        print(f"{overlay}: {len(rendered.objects)} objects ({kinds})")
        for e in errors:
            print(f"  SCHEMA {e}")
        failed |= bool(errors)
        if not errors:
            print(f"  strict schemas OK for Kubernetes {', '.join(K8S_VERSIONS)} -> {path}")
    if args.checkov:
        failed |= run_checkov(args.checkov, files) != 0
    print("k8s check: FAILED" if failed else "k8s check: OK")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
