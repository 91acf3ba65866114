#!/usr/bin/env python3
"""What is in a built image, measured from its files (docker/image.sh runs it after `make image`).

    image_report.py IMAGE ROOTFS INSPECT_JSON OUT_DIR
    image_report.py --line OUT_DIR/summary.json

ROOTFS: the image's root filesystem, mounted (`buildah mount`); INSPECT_JSON: `buildah inspect
--type image IMAGE`. Writes to OUT_DIR:
  layers.tsv     each layer's size (MB, uncompressed) and the instruction that made it
  packages.tsv   every Debian package and every Python distribution of /opt/venv and
                 /opt/venv-oip: source, name, version, licence (Debian: the copyright file's
                 License fields; Python: License-Expression, License or its classifiers)
  summary.json   the image id, total size, user, the checks below
Checks (exit status 1 when one fails): the image's user is a numeric non-root uid; no C/C++
compiler in the final filesystem (gcc, cc, g++, c++, clang, tcc on PATH's folders, or a Debian
package that installs one).
Standard library only.
"""

from __future__ import annotations

import json
import re
import sys
from email.parser import HeaderParser
from pathlib import Path

COMPILERS = ("gcc", "cc", "g++", "c++", "clang", "clang++", "tcc", "x86_64-linux-gnu-gcc")
COMPILER_PACKAGES = re.compile(r"^(gcc|g\+\+|cpp|clang|tcc|build-essential)(-\d+)?$")
VENVS = {"venv": "opt/venv", "venv-oip": "opt/venv-oip"}


def debian_packages(root: Path) -> list[tuple[str, str, str, str]]:
    status = (root / "var/lib/dpkg/status").read_text(errors="replace")
    out = []
    for block in status.split("\n\n"):
        fields = dict(re.findall(r"^([A-Za-z-]+): (.*)$", block, re.M))
        if "Package" not in fields or "installed" not in fields.get("Status", ""):
            continue
        name = fields["Package"]
        copyright_file = root / "usr/share/doc" / name / "copyright"
        licences: list[str] = []
        if copyright_file.is_file():
            for lic in re.findall(
                r"^License: *(\S.*)$", copyright_file.read_text(errors="replace"), re.M
            ):
                if lic not in licences:
                    licences.append(lic.strip())
        out.append(
            ("debian", name, fields.get("Version", ""), ", ".join(licences[:6]) or "see copyright")
        )
    return sorted(out)


def python_packages(root: Path) -> list[tuple[str, str, str, str]]:
    out = []
    for source, venv in VENVS.items():
        for meta in sorted((root / venv).glob("lib/python3*/site-packages/*.dist-info/METADATA")):
            headers = HeaderParser().parsestr(meta.read_text(errors="replace"))
            licence = headers.get("License-Expression") or ""
            if not licence:
                text = (headers.get("License") or "").strip()
                licence = text if text and "\n" not in text and len(text) <= 80 else ""
            if not licence:
                classifiers = [
                    c.split("::")[-1].strip()
                    for c in headers.get_all("Classifier") or []
                    if c.startswith("License ::")
                ]
                licence = ", ".join(classifiers) or "see the distribution's files"
            out.append((source, headers["Name"], headers["Version"], licence))
    return out


def layers(inspect: dict) -> list[tuple[float, str]]:
    manifest = json.loads(inspect["Manifest"])
    sizes = [layer.get("size", 0) / 1e6 for layer in manifest["layers"]]
    history = [h for h in inspect["OCIv1"].get("history", []) if not h.get("empty_layer")]
    made_by = [h.get("created_by", "") for h in history]
    made_by = [""] * (len(sizes) - len(made_by)) + made_by  # a base imported with no history
    return list(zip(sizes, made_by[-len(sizes) :] if sizes else [], strict=True))


def compilers(root: Path, packages: list[tuple[str, str, str, str]]) -> list[str]:
    found = []
    for folder in ("usr/bin", "usr/local/bin", "bin", "opt/venv/bin", "opt/venv-oip/bin"):
        for name in COMPILERS:
            path = root / folder / name
            if path.exists() or path.is_symlink():
                found.append(f"/{folder}/{name}")
        found += [f"/{folder}/{p.name}" for p in (root / folder).glob("*-linux-gnu-gcc*")]
    found += [
        f"package {n}" for s, n, _, _ in packages if s == "debian" and COMPILER_PACKAGES.match(n)
    ]
    return sorted(set(found))


def main(argv: list[str]) -> int:
    if argv[0] == "--line":  # image_report.py --line summary.json: the summary in one line
        s = json.loads(Path(argv[1]).read_text())
        found = ", ".join(s["compilers_found"]) or "none"
        print(
            f"{s['size_mb']:.0f} MB in {s['layers']} layers, user {s['user']}, compilers: {found}"
        )
        return 0
    image, root, inspect_path, out = argv[0], Path(argv[1]), Path(argv[2]), Path(argv[3])
    inspect = json.loads(inspect_path.read_text())
    out.mkdir(parents=True, exist_ok=True)
    made = layers(inspect)
    with (out / "layers.tsv").open("w") as f:
        f.write("layer\tMB\tcreated_by\n")
        for i, (mb, by) in enumerate(made):
            f.write(f"{i}\t{mb:.1f}\t{' '.join(by.split())[:300]}\n")
    packages = debian_packages(root) + python_packages(root)
    with (out / "packages.tsv").open("w") as f:
        f.write("source\tname\tversion\tlicence\n")
        f.writelines("\t".join(p) + "\n" for p in packages)
    user = inspect["OCIv1"]["config"].get("User", "")
    uid = user.split(":")[0]
    found = compilers(root, packages)
    checks = {
        "user is a numeric non-root uid": uid.isdigit() and uid != "0",
        "no compiler in the final filesystem": not found,
    }
    summary = {
        "image": image,
        "id": inspect.get("FromImageID", ""),
        "size_mb": round(sum(mb for mb, _ in made), 1),
        "layers": len(made),
        "user": user,
        "packages": {s: sum(1 for p in packages if p[0] == s) for s in ("debian", *VENVS)},
        "compilers_found": found,
        "checks": checks,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    failed = [name for name, ok in checks.items() if not ok]
    for name in failed:
        print(f"image: check failed: {name}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
