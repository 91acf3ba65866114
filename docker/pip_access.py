#!/usr/bin/env python3
"""This machine's pip configuration, for an image build's RUN steps (docker/image.sh).

    pip_access.py OUT_DIR [REQUIREMENTS]

Writes OUT_DIR/pip.conf from `pip config list` (the files' settings and PIP_* variables, the
variables winning as they do for pip) and prints, one a line, the builder's arguments that mount it
at /etc/pip.conf (pip's site-wide file) and every local path it names (CA bundle, constraints,
find-links folders, file:// indexes) read-only at the same path. A RUN step's mounts are not part
of any layer, and only /opt/venv and /opt/venv-oip leave the build stages, so the image carries
none of it: this is how a build reaches packages behind a proxy or from a mirror.

With REQUIREMENTS (requirements-serve.txt), the last line is `TORCH_INDEX_URL=` when a find-links
folder holds the pinned torch wheel (then the PyTorch index is not needed), else nothing.
Standard library only: the machine's own python3 runs it before any venv exists.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

PATH_KEYS = {"cert", "client-cert", "constraint", "find-links", "index-url", "extra-index-url"}


def settings() -> dict[str, dict[str, str]]:
    listing = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=True
    ).stdout
    sections: dict[str, dict[str, str]] = {}
    env: dict[str, str] = {}
    for line in listing.splitlines():
        key, sep, value = line.partition("=")
        if not sep:
            continue
        scope, _, name = key.rpartition(".")
        text = ast.literal_eval(value)
        if scope == ":env:":
            env[name] = text
        else:
            sections.setdefault(scope, {})[name] = text
    sections.setdefault("global", {}).update(env)
    return sections


def local_paths(value: str) -> list[Path]:
    """The local files and folders one setting names: a path, or a file:// URL; an index's
    `simple/` folder links to files beside it, so its parent goes in whole."""
    out = []
    for word in value.split():
        if word.startswith("file://"):
            path = Path(unquote(urlparse(word).path))
            out.append(path.parent if path.name == "simple" else path)
        elif "://" not in word and Path(word).exists():
            out.append(Path(word))
    return out


def torch_wheel_found(sections: dict[str, dict[str, str]], requirements: Path) -> bool:
    pins = [
        line.split("==", 1)[1].strip()
        for line in requirements.read_text().splitlines()
        if line.startswith("torch==")
    ]
    if not pins:
        return False
    links = [p for s in sections.values() for p in local_paths(s.get("find-links", ""))]
    return any(d.is_dir() and any(d.glob(f"torch-{pins[0]}-*.whl")) for d in links)


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    sections = settings()
    lines, mounts = [], set()
    for section, values in sections.items():
        lines.append(f"[{section}]")
        for name, value in values.items():
            lines.append(f"{name} = {value}")
            if name in PATH_KEYS:
                mounts.update(local_paths(value))
    (out / "pip.conf").write_text("\n".join(lines) + "\n")
    print("--volume")
    print(f"{out / 'pip.conf'}:/etc/pip.conf:ro")
    for path in sorted(mounts):
        print("--volume")
        print(f"{path}:{path}:ro")
    if len(argv) > 1 and torch_wheel_found(sections, Path(argv[1])):
        print("TORCH_INDEX_URL=")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
