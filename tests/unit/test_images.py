"""The serving images agree with the project's requirements and carry what the pod runs.

No Docker engine here, so the Dockerfiles are checked as text against the requirements files and
the repository: what they install, what they copy, who they run as.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILES = {"cpu": ROOT / "docker/Dockerfile.cpu", "gpu": ROOT / "docker/Dockerfile.gpu"}
REQUIREMENTS = {"cpu": "requirements-serve.txt", "gpu": "requirements-gpu.txt"}
# The only packages the CUDA set may add or swap, each explained in requirements-gpu.txt.
GPU_SWAPS = {"onnxruntime": "onnxruntime-gpu"}
GPU_EXTRAS = {"nvgpu", "pynvml"}


def pins(name: str) -> dict[str, str]:
    out = {}
    for line in (ROOT / name).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            pkg, sep, version = line.partition("==")
            assert sep, f"{name}: {line!r} is not pinned with =="
            out[pkg.strip().lower()] = version.strip()
    return out


def public(version: str) -> str:
    return version.split("+", 1)[0]


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    text = re.sub(r"\\\n", " ", path.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            op, _, rest = line.partition(" ")
            out.append((op.upper(), rest.strip()))
    return out


def test_serving_requirements_pin_the_same_versions_as_requirements_txt():
    project, serve = pins("requirements.txt"), pins("requirements-serve.txt")
    assert {"torch", "torchserve", "onnxruntime", "boto3"} <= serve.keys()
    for pkg, version in serve.items():
        assert pkg in project, f"{pkg} is served but not in requirements.txt"
        assert public(version) == project[pkg], f"{pkg}: serve {version} vs {project[pkg]}"
    assert serve["torch"].endswith("+cpu"), "the CPU image must not pull the CUDA torch wheel"


def test_gpu_requirements_differ_from_serving_only_by_the_cuda_builds():
    serve, gpu = pins("requirements-serve.txt"), pins("requirements-gpu.txt")
    expected = {GPU_SWAPS.get(pkg, pkg) for pkg in serve} | GPU_EXTRAS
    assert set(gpu) == expected
    assert gpu["torch"].startswith(public(serve["torch"]) + "+cu"), gpu["torch"]
    assert gpu["torchserve"] == serve["torchserve"]
    for pkg, version in serve.items():
        if pkg not in GPU_SWAPS and pkg != "torch":
            assert gpu[pkg] == version, f"{pkg}: gpu {gpu[pkg]} vs serve {version}"
    index = [
        ln for ln in (ROOT / "requirements-gpu.txt").read_text().splitlines() if "index-url" in ln
    ]
    assert index and all("/whl/cu" in ln for ln in index), "torch must come from the CUDA index"


@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_every_pip_install_uses_the_images_requirements_file(kind):
    runs = [
        args
        for op, args in instructions(DOCKERFILES[kind])
        if op == "RUN" and "pip install" in args
    ]
    assert runs, "the image installs nothing with pip"
    files = set()
    for args in runs:
        for pip, cmd in re.findall(r"(\S*)pip install([^&;]*)", args):
            words = [w for w in cmd.split() if not w.startswith("--")]
            assert words[0] == "-r" and len(words) == 2, (
                f"packages outside a requirements file: {cmd}"
            )
            wanted = OIP_REQUIREMENTS[kind] if pip.startswith(OIP_LAYER) else REQUIREMENTS[kind]
            assert words[1].endswith(wanted), cmd
            files.add(wanted)
    assert REQUIREMENTS[kind] in files
    copied = " ".join(args for op, args in instructions(DOCKERFILES[kind]) if op == "COPY")
    for name in files:
        assert name in copied


OIP_LAYER = "/opt/venv-oip/"
"""The Open Inference Protocol server's layer over /opt/venv (RUNTIME=oip): its own venv, from its
own requirements file (requirements-oip.txt says why), in both images."""
OIP_REQUIREMENTS = {"cpu": "requirements-oip.txt", "gpu": "requirements-oip-gpu.txt"}


@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_the_image_carries_the_oip_server_as_a_layer_over_the_serving_venv(kind):
    text = re.sub(r"\\\n", " ", DOCKERFILES[kind].read_text())
    assert re.search(r"echo /opt/venv/lib/python3\.11/site-packages > /opt/venv-oip/\S+\.pth", text)
    ops = instructions(DOCKERFILES[kind])
    made = [i for i, (op, a) in enumerate(ops) if op == "RUN" and "python -m venv" in a]
    venvs = [ops[i][1].split("python -m venv ", 1)[1].split()[0] for i in made]
    assert venvs == ["/opt/venv", "/opt/venv-oip"], venvs  # the layer over the venv, in the image
    assert "oip/" in copy_sources(kind)
    layer = [a for op, a in instructions(DOCKERFILES[kind]) if op == "RUN" and OIP_LAYER in a]
    assert layer and all(OIP_REQUIREMENTS[kind] in a for a in layer if "pip install" in a)
    entrypoint = (ROOT / "docker/entrypoint.sh").read_text()
    assert "${OIP_PYTHON:-/opt/venv-oip/bin/python} -m oip" in entrypoint.replace('"', "")
    assert 'RUNTIME="${RUNTIME:-torchserve}"' in entrypoint  # TorchServe stays the default


@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_a_code_change_rebuilds_only_the_layers_after_the_venvs(kind):
    """The builder's cache (`make image`, CI): the venvs' layers depend on their requirements files
    alone, and the project's files are copied after them, so a changed handler rebuilds only the
    COPY layers. One stage: a venv copied out of another (COPY --from) is read and hashed in full
    by buildah on every rebuild, cached or not."""
    ops = instructions(DOCKERFILES[kind])
    assert [op for op, _ in ops].count("FROM") == 1, "one stage: no venv copied between stages"
    assert not [a for op, a in ops if op == "COPY" and "--from=" in a]
    requirements = (REQUIREMENTS[kind], OIP_REQUIREMENTS[kind])
    pip = [i for i, (op, a) in enumerate(ops) if op == "RUN" and "pip install" in a]
    assert len(pip) == 2, pip
    for i in pip:  # each install right after the COPY of its own requirements file, and only it
        op, args = ops[i - 1]
        assert op == "COPY" and args.split()[0] in requirements, (ops[i - 1], ops[i])
    project = [
        i
        for i, (op, a) in enumerate(ops)
        if op == "COPY" and not any(a.startswith(r + " ") for r in requirements)
    ]
    assert project and min(project) > max(pip), "a project file copied before a venv's install"
    before = [a for op, a in ops[: min(pip) - 1] if op in ("COPY", "ADD")]
    assert not before, before


@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_base_images_are_pinned_exact_tags_never_latest(kind):
    ops = instructions(DOCKERFILES[kind])
    # Build arguments declared before the first FROM, with their defaults: a FROM may name one
    # (BASE_IMAGE: `make image` replaces the base where the registry cannot be reached), and then
    # its default is the pinned base.
    defaults = {}
    for op, args in ops:
        if op == "FROM":
            break
        if op == "ARG":
            name, sep, value = args.partition("=")
            assert sep, f"ARG {args}: no default to check"
            defaults[name] = value
    froms = [args.split()[0] for op, args in ops if op == "FROM"]
    assert froms
    for image in froms:
        image = re.sub(r"\$\{(\w+)\}", lambda m: defaults.get(m.group(1), m.group(0)), image)
        assert "$" not in image, "base image hidden behind an ARG without a default"
        name, _, tag = image.partition("@")[0].rpartition(":")
        assert name and re.fullmatch(r"\d+\.\d+\.\d+-[a-z0-9.-]+", tag), f"{image}: no exact tag"
        assert "latest" not in image


@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_image_runs_torchserve_as_a_non_root_user_under_tini(kind):
    ops = instructions(DOCKERFILES[kind])
    users = [args for op, args in ops if op == "USER"]
    assert users and users[-1].split(":")[0] not in ("0", "root")
    assert users[-1].split(":")[0].isdigit(), "numeric uid, so runAsNonRoot can verify it"
    entrypoint = [args for op, args in ops if op == "ENTRYPOINT"][-1]
    assert "tini" in entrypoint and "entrypoint.sh" in entrypoint
    assert "torchserve --start --foreground" in (ROOT / "docker/entrypoint.sh").read_text()


def copy_sources(kind: str) -> list[str]:
    sources = []
    for op, args in instructions(DOCKERFILES[kind]):
        if op == "COPY" and "--from=" not in args:
            words = [w for w in args.split() if not w.startswith("--")]
            sources += words[:-1]
    return sources


@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_every_copied_path_exists_and_passes_the_dockerignore(kind):
    allowed = [
        line[1:].rstrip("/")
        for line in Path(f"{DOCKERFILES[kind]}.dockerignore").read_text().splitlines()
        if line.startswith("!")
    ]
    for src in copy_sources(kind):
        assert (ROOT / src).exists(), f"COPY {src}: not in the repository"
        assert src.rstrip("/") in allowed, f"COPY {src}: excluded by the .dockerignore"


def test_image_carries_the_handlers_and_every_project_module_the_pull_tool_imports():
    code = (
        "import sys, deploy.__main__\n"
        "print('\\n'.join(m.__file__ for m in list(sys.modules.values()) if getattr(m, '__file__', None)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    ).stdout.split()
    local = {
        Path(f).resolve().relative_to(ROOT).as_posix()
        for f in out
        if Path(f).is_absolute() and Path(f).resolve().is_relative_to(ROOT)
    }
    local = {f for f in local if not f.startswith(".venv")}
    assert "deploy/s3/pull.py" in local
    local.add("handlers/")  # the whole package: TorchServe imports handlers.* from the image too
    for kind in DOCKERFILES:
        sources = copy_sources(kind)
        missing = [
            f
            for f in local
            if not any(f == s or (s.endswith("/") and f.startswith(s)) for s in sources)
        ]
        assert not missing, f"{kind} image lacks {missing}"


@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_image_carries_haproxy_and_the_pod_proxy_config(kind):
    runs = " ".join(args for op, args in instructions(DOCKERFILES[kind]) if op == "RUN")
    assert re.search(r"apt-get install [^&]*\bhaproxy\b", runs), "the pod proxy needs HAProxy"
    sources = copy_sources(kind)
    assert {"docker/proxy.sh", "docker/haproxy.cfg"} <= set(sources)
    assert "auth_proxy" not in DOCKERFILES[kind].read_text()
    # proxy.sh finds the config next to itself, so both land in the same folder.
    copies = [args.split()[-1] for op, args in instructions(DOCKERFILES[kind]) if op == "COPY"]
    dests = {
        dest
        for (op, args), dest in zip(
            [i for i in instructions(DOCKERFILES[kind]) if i[0] == "COPY"], copies, strict=True
        )
        if "proxy.sh" in args or "haproxy.cfg" in args
    }
    assert len(dests) == 1, dests


def test_the_gpu_oip_layer_keeps_the_cuda_builds_of_the_gpu_venv():
    """The CUDA image's OIP layer pins what the CPU image's does, except torch and ONNX Runtime,
    which are exactly the CUDA image's own (already in /opt/venv below the layer, so pip leaves
    them there): a CPU torch or onnxruntime in the layer would shadow the CUDA builds."""
    oip, oip_gpu, gpu = (
        pins("requirements-oip.txt"),
        pins("requirements-oip-gpu.txt"),
        pins("requirements-gpu.txt"),
    )
    assert set(oip_gpu) == {GPU_SWAPS.get(pkg, pkg) for pkg in oip}
    for pkg, version in oip_gpu.items():
        if pkg == "torch" or pkg in GPU_SWAPS.values():
            assert version == gpu[pkg], (
                f"{pkg}: the OIP layer {version} vs the CUDA image {gpu[pkg]}"
            )
        else:
            assert version == oip[pkg], f"{pkg}: gpu layer {version} vs requirements-oip {oip[pkg]}"
    assert "onnxruntime" not in oip_gpu and oip_gpu["torch"].endswith("+cu130")
