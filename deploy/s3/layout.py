"""Where things live in the bucket.

<prefix>/<model>/<version>/<model>.mar      the archive (immutable)
<prefix>/<model>/<version>/manifest.json    written last: its presence means "published"
<prefix>/<model>/stages/<stage>.json        stage pointer + history of moves
"""

from __future__ import annotations

import re
from dataclasses import dataclass

STAGES = ("production", "staging")
STAGES_DIR = "stages"
MANIFEST = "manifest.json"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")


def check_name(kind: str, value: str) -> str:
    """Model and version names become key segments and file names: keep them boring."""
    if not _NAME.fullmatch(value or "") or value in {".", ".."}:
        raise ValueError(f"invalid {kind} {value!r}: use letters, numbers, '.', '_', '+', '-'")
    if kind == "version" and value == STAGES_DIR:
        raise ValueError(f"version {value!r} is reserved for stage pointers")
    return value


def check_stage(stage: str) -> str:
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}: choose one of {', '.join(STAGES)}")
    return stage


@dataclass(frozen=True)
class Layout:
    bucket: str
    prefix: str = ""

    def _join(self, *parts: str) -> str:
        return "/".join(p for p in (self.prefix.strip("/"), *parts) if p)

    def root(self) -> str:
        """Key prefix under which the models' folders sit ('' or 'p/')."""
        return self._join("") + "/" if self.prefix.strip("/") else ""

    def model_dir(self, model: str) -> str:
        return self._join(model) + "/"

    def archive(self, model: str, version: str) -> str:
        return self._join(model, version, f"{model}.mar")

    def manifest(self, model: str, version: str) -> str:
        return self._join(model, version, MANIFEST)

    def stage(self, model: str, stage: str) -> str:
        return self._join(model, STAGES_DIR, f"{stage}.json")

    def url(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"
