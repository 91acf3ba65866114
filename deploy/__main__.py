"""python -m deploy publish|promote|rollback|list|pull: the S3 model store from the command line.

    python -m deploy create-bucket --bucket B
    python -m deploy publish model_store/MODEL.mar --bucket B --prefix models
    python -m deploy promote MODEL 2026.11.25-213100-abc123def456 --stage production --bucket B
    python -m deploy promote MODEL --archive model_store/MODEL.mar --stage production --bucket B
    python -m deploy rollback MODEL --stage production --bucket B
    python -m deploy list [MODEL] --bucket B
    python -m deploy pull MODEL --stage production --dest model_store --bucket B
    python -m deploy pull --all --stage production --dest model_store --bucket B   # every registered model

Credentials and region: the standard AWS chain. --endpoint-url (or AWS_ENDPOINT_URL) for
S3-compatible stores. --bucket / --prefix default to MODEL_BUCKET / MODEL_PREFIX.
Exit status: 0 done, 1 refused or failed (one line on stderr says why), 2 bad usage.
"""

from __future__ import annotations

import argparse
import os
import sys

from deploy.s3 import (
    STAGES,
    Layout,
    StoreError,
    StoreSettings,
    list_versions,
    promote,
    publish,
    pull,
    rollback,
)
from deploy.s3.archive_info import read_training_manifest
from deploy.s3.bucket import create_bucket
from deploy.s3.catalog import format_rows
from handlers import registry


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--bucket", default=os.environ.get("MODEL_BUCKET"), help="[MODEL_BUCKET]")
    common.add_argument(
        "--prefix",
        default=os.environ.get("MODEL_PREFIX", "models"),
        help="[MODEL_PREFIX, else models]",
    )
    common.add_argument("--endpoint-url", help="S3-compatible endpoint [AWS_ENDPOINT_URL]")
    common.add_argument("--region", help="[AWS chain: AWS_REGION, ~/.aws/config]")
    common.add_argument("--connect-timeout", type=float, default=StoreSettings.connect_timeout)
    common.add_argument("--read-timeout", type=float, default=StoreSettings.read_timeout)
    common.add_argument("--max-attempts", type=int, default=StoreSettings.max_attempts)
    common.add_argument("--no-progress", action="store_true", help="no progress bar")

    p = argparse.ArgumentParser(
        prog="python -m deploy",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", required=True)

    sub.add_parser(
        "create-bucket", parents=[common], help="create the bucket (once, before publish)"
    )

    s = sub.add_parser("publish", parents=[common], help="upload a .mar as a new immutable version")
    s.add_argument("archive")
    s.add_argument("--version", help="default: the version in the archive's manifest.json")
    s.add_argument("--model", help="default: the archive's file name without .mar")

    s = sub.add_parser("promote", parents=[common], help="point a stage at a published version")
    s.add_argument("model")
    s.add_argument("version", nargs="?", help="or --archive")
    s.add_argument(
        "--archive", help="promote the version `publish` gave this .mar (its manifest's version)"
    )
    s.add_argument("--stage", required=True, choices=STAGES)

    s = sub.add_parser(
        "rollback", parents=[common], help="move a stage back to its previous version"
    )
    s.add_argument("model")
    s.add_argument("--stage", required=True, choices=STAGES)

    s = sub.add_parser("list", parents=[common], help="versions, sizes, dates, sha256 and stages")
    s.add_argument("model", nargs="?")

    s = sub.add_parser("pull", parents=[common], help="download, verify, then install a version")
    which_model = s.add_mutually_exclusive_group(required=True)
    which_model.add_argument("model", nargs="?")
    which_model.add_argument(
        "--all", action="store_true", help="every registered model (handlers/registry.py)"
    )
    which = s.add_mutually_exclusive_group(required=True)
    which.add_argument("--version")
    which.add_argument("--stage", choices=STAGES)
    s.add_argument("--dest", required=True, help="folder (e.g. a TorchServe model store)")
    s.add_argument("--name", help="final file name (default <model>.mar)")
    return p


def run(args: argparse.Namespace) -> str:
    layout = Layout(args.bucket, args.prefix)
    settings = StoreSettings(
        endpoint_url=args.endpoint_url,
        region=args.region,
        connect_timeout=args.connect_timeout,
        read_timeout=args.read_timeout,
        max_attempts=args.max_attempts,
    )
    progress = not args.no_progress
    if args.command == "create-bucket":
        created = create_bucket(args.bucket, settings)
        return f"{'created' if created else 'already there:'} s3://{args.bucket}"
    if args.command == "publish":
        done = publish(args.archive, layout, args.version, args.model, settings, progress)
        m = done.manifest
        registered = f"; MLflow {m['mlflow']['model_uri']}" if m.get("mlflow") else ""
        return f"published {m['model']} {m['version']} ({m['size']} bytes, sha256 {m['sha256']}{registered}) to {done.archive_url}"
    if args.command == "promote":
        version = args.version or read_training_manifest(args.archive).get("version")
        if not version:
            raise SystemExit(f"promote: {args.archive} names no version; give one")
        doc = promote(args.model, version, args.stage, layout, settings)
        return f"{args.model} {args.stage} -> {doc['version']}"
    if args.command == "rollback":
        doc = rollback(args.model, args.stage, layout, settings)
        return f"{args.model} {args.stage} rolled back to {doc['version']}"
    if args.command == "list":
        return format_rows(list_versions(layout, args.model, settings))
    if args.all and args.name:
        raise SystemExit("pull: --name names one model's file; not with --all")
    lines = []
    for model in registry.names() if args.all else [args.model]:
        got = pull(
            model, args.dest, layout, args.version, args.stage, args.name, settings, progress
        )
        m = got.manifest
        served = m.get("training_version") or m["version"]
        lines.append(
            f"pulled {m['model']} {m['version']} (sha256 {m['sha256']} verified) to {got.path}; "
            f"answers report model.version {served}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not args.bucket:
        parser.error("--bucket (or MODEL_BUCKET) is required")
    if args.command == "promote" and (args.version is None) == (args.archive is None):
        parser.error("promote takes exactly one of VERSION or --archive")
    try:
        print(run(args))
    except (StoreError, ValueError, OSError) as e:  # OSError: e.g. --dest is not a folder
        print(f"deploy {args.command}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
