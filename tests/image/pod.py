"""The built serving image run as the rendered Deployment runs it, with no kubelet and no container
runtime (`make image-test`, docs/kubernetes.md "Building the image").

Each of the pod's containers (the Deployment's `torchserve` and `proxy`, the rollout overlay's
`mirror`, or the rollout-recorder's `recorder`, as `kubectl kustomize` renders the overlay) gets
its own copy of the image's root filesystem (`buildah from`, `buildah mount`) and is started the
way an OCI runtime starts it:
- its own mount, PID, UTS and IPC namespaces (`unshare`), the pod's network namespace shared by
  all (the caller's: `make image-test` runs in a new one, with loopback only, which two pods
  share: a Service's name is written into /etc/hosts as loopback where the cluster's DNS would
  resolve it);
- the Deployment's volumes bind-mounted where its volumeMounts say (emptyDirs group-owned by the
  pod's fsGroup, the ConfigMap one file per key, the Secrets read-only), /proc, a minimal /dev,
  and /etc/hosts, /etc/hostname as the kubelet writes them;
- the root filesystem then remounted read-only (readOnlyRootFilesystem);
- the process: the container's `command` (else the image's ENTRYPOINT) with the image's Env, then
  the container's env, in the image's WorkingDir, as runAsUser:runAsGroup with fsGroup as its
  supplementary group, no capabilities (bounding set emptied) and no_new_privs
  (allowPrivilegeEscalation: false), exec'd as the namespace's PID 1 (tini, for the server).
Exec probes and preStop hooks run inside the container (`nsenter` into its namespaces and root, as
the container's user and env), as the kubelet's exec does; tcpSocket and httpGet probes connect
to the pod's loopback; termination is preStop, then SIGTERM to
PID 1, then SIGKILL at terminationGracePeriodSeconds.

What differs from a kubelet with containerd or CRI-O: no cgroup (the resources' requests and limits
are not enforced), no seccomp profile (RuntimeDefault) and no AppArmor/SELinux label, no pod IP or
CNI (the pod's network namespace has loopback only: clients reach the door on 127.0.0.1), the init
container (`python -m deploy pull` from S3) is replaced by copying the archives into the
model-store volume, and the probes run every second (to time READY), not every periodSeconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")


def buildah(*args: str) -> str:
    return subprocess.run(["buildah", *args], capture_output=True, text=True, check=True).stdout


def image_config(image: str) -> dict:
    """The image's OCI config (Env, User, WorkingDir, Entrypoint, Cmd)."""
    info = json.loads(buildah("inspect", "--type", "image", image))
    return info["OCIv1"]["config"]


@dataclass
class Rootfs:
    """One container's root filesystem: a working container of the image, mounted."""

    image: str
    container: str = ""
    path: Path = Path()

    def __enter__(self) -> Rootfs:
        self.container = buildah("from", "--pull=false", "--quiet", self.image).strip()
        self.path = Path(buildah("mount", self.container).strip())
        return self

    def __exit__(self, *exc: object) -> None:
        subprocess.run(["buildah", "rm", self.container], capture_output=True)


def in_root(root: Path, path: str) -> str:
    """`path` inside a root filesystem with its symlinks followed within that root (Debian's
    /var/run is a link to /run): where a runtime mounts a volume, never a path of the host's."""
    parts = [p for p in path.split("/") if p]
    resolved: list[str] = []
    hops = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            resolved = resolved[:-1]
            continue
        here = root.joinpath(*resolved, part)
        if here.is_symlink():
            hops += 1
            assert hops < 40, f"{path}: too many links"
            target = os.readlink(here)
            if target.startswith("/"):
                resolved = []
            parts = [p for p in target.split("/") if p and p != "."] + parts
            continue
        resolved.append(part)
    return "/" + "/".join(resolved)


def resolve(spec: dict, config: dict) -> list[str]:
    """What the runtime execs: command (else ENTRYPOINT) + args (else Cmd, when no command)."""
    command = spec.get("command")
    if command:
        return list(command) + list(spec.get("args") or [])
    return list(config.get("Entrypoint") or []) + list(spec.get("args") or config.get("Cmd") or [])


def environment(spec: dict, config: dict, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(e.split("=", 1) for e in config.get("Env") or [])
    env |= {e["name"]: str(e["value"]) for e in spec.get("env") or [] if "value" in e}
    env["HOSTNAME"] = "torchserve-0"
    return env | (extra or {})


@dataclass
class Container:
    name: str
    spec: dict
    rootfs: Rootfs
    env: dict[str, str]
    workdir: str
    uid: int
    gid: int
    fs_group: int
    log: Path
    process: subprocess.Popen | None = None

    @property
    def pid1(self) -> int:
        """The host's pid of the container's PID 1 (unshare's one child)."""
        assert self.process is not None
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        for _ in range(100):
            text = children.read_text().split() if children.exists() else []
            if text:
                return int(text[0])
            time.sleep(0.05)
        raise RuntimeError(f"{self.name}: no PID 1 under unshare {self.process.pid}")

    def exec(
        self, argv: list[str], timeout: float, user: bool = True
    ) -> subprocess.CompletedProcess:
        """argv inside the container, as the kubelet's exec probe or hook runs it."""
        cmd = ["nsenter", "--target", str(self.pid1), "--mount", "--uts", "--ipc", "--pid"]
        cmd += ["--root", "--wd"]
        if user:
            cmd += ["--setuid", str(self.uid), "--setgid", str(self.gid)]
        cmd += ["--", "/usr/bin/env", "-i", *(f"{k}={v}" for k, v in self.env.items()), *argv]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)

    def processes(self) -> list[tuple[int, int, str]]:
        """(host pid, real uid, command) of every process in the container's PID namespace."""
        ns = os.readlink(f"/proc/{self.pid1}/ns/pid")
        out = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                if os.readlink(entry / "ns" / "pid") != ns:
                    continue
                status = (entry / "status").read_text()
                uid = int(
                    next(ln for ln in status.splitlines() if ln.startswith("Uid:")).split()[1]
                )
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
                out.append((int(entry.name), uid, cmdline))
        return out


@dataclass
class ImagePod:
    """The rendered Deployment's pod, its containers started from `image` (see the module doc)."""

    image: str
    deployment: dict
    configmap: dict[str, str]
    archives: list[Path]
    root: Path
    tokens: list[str]
    state_key: str
    configmaps: dict[str, dict[str, str]] = field(default_factory=dict)
    """Other ConfigMaps' data by their rendered name (a volume of another name gets `configmap`)."""
    hosts: tuple[str, ...] = ()
    """Service names the cluster's DNS would resolve, here to loopback (the pods share one
    network namespace)."""
    containers: dict[str, Container] = field(default_factory=dict)
    started: float = 0.0
    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    @property
    def pod_spec(self) -> dict:
        return self.deployment["spec"]["template"]["spec"]

    @property
    def grace(self) -> float:
        return float(self.pod_spec.get("terminationGracePeriodSeconds", 30))

    def spec(self, name: str) -> dict:
        (spec,) = [c for c in self.pod_spec["containers"] if c["name"] == name]
        return spec

    # --- volumes ---------------------------------------------------------------------------------
    def volumes(self) -> dict[str, Path]:
        """Each volume of the pod as a folder on the host, filled as the kubelet fills it."""
        security = self.pod_spec.get("securityContext") or {}
        fs_group = int(security.get("fsGroup", 0))
        out = {}
        for volume in self.pod_spec["volumes"]:
            path = self.root / "volumes" / volume["name"]
            path.mkdir(parents=True)
            if "emptyDir" in volume:
                os.chown(path, 0, fs_group)
                path.chmod(0o2777)  # emptyDir: world-writable; fsGroup owns it, setgid
            elif "configMap" in volume:
                data = self.configmaps.get(volume["configMap"]["name"], self.configmap)
                for key, value in data.items():
                    (path / key).write_text(value)
            elif "secret" in volume:
                name = volume["secret"]["secretName"]
                data = {
                    "torchserve-client-tokens": {"tokens": "\n".join(self.tokens) + "\n"},
                    "torchserve-stream-state-key": {"key": self.state_key + "\n"},
                }.get(name)
                if data is None:
                    assert volume["secret"].get("optional"), f"no Secret {name} for the test pod"
                    continue  # an optional Secret that does not exist: an empty volume
                mode = volume["secret"].get("defaultMode", 0o644)
                for key, value in data.items():
                    (path / key).write_text(value)
                    os.chown(path / key, 0, fs_group)
                    (path / key).chmod(mode)
            out[volume["name"]] = path
        # What the init container pulls: the archives, renamed into the store.
        for mar in self.archives:  # none for a pod without a model store
            shutil.copyfile(mar, out["model-store"] / mar.name)
            os.chown(out["model-store"] / mar.name, int(security.get("runAsUser", 0)), fs_group)
        return out

    # --- containers ------------------------------------------------------------------------------
    def start(self, runtime_env: dict[str, str] | None = None) -> ImagePod:
        config = image_config(self.image)
        volumes = self.volumes()
        security = self.pod_spec.get("securityContext") or {}
        etc = self.root / "etc"
        etc.mkdir()
        (etc / "hosts").write_text(
            "127.0.0.1\tlocalhost\n::1\tlocalhost\n127.0.0.1\ttorchserve-0\n"
            + "".join(f"127.0.0.1\t{name}\n" for name in self.hosts)
        )
        (etc / "hostname").write_text("torchserve-0\n")
        self.started = time.monotonic()
        for name in [c["name"] for c in self.pod_spec["containers"]]:
            spec = self.spec(name)
            ctx = spec.get("securityContext") or {}
            assert ctx.get("readOnlyRootFilesystem"), f"{name}: the manifest's root is writable?"
            assert ctx.get("allowPrivilegeEscalation") is False
            assert ctx.get("capabilities", {}).get("drop") == ["ALL"]
            user = str(config.get("User") or "0")
            uid = int(ctx.get("runAsUser", security.get("runAsUser", user.split(":")[0])))
            gid = int(ctx.get("runAsGroup", security.get("runAsGroup", uid)))
            rootfs = self._stack.enter_context(Rootfs(self.image))
            container = Container(
                name=name,
                spec=spec,
                rootfs=rootfs,
                env=environment(spec, config, runtime_env),
                workdir=spec.get("workingDir") or config.get("WorkingDir") or "/",
                uid=uid,
                gid=gid,
                fs_group=int(security.get("fsGroup", gid)),
                log=self.root / f"{name}.log",
            )
            self._launch(container, volumes, etc, resolve(spec, config))
            self.containers[name] = container
        return self

    def _launch(self, c: Container, volumes: dict[str, Path], etc: Path, argv: list[str]) -> None:
        r = shlex.quote(str(self.root / "mnt" / c.name))
        q = shlex.quote
        lines = ["set -eu", f"mkdir -p {r}", f"mount --bind {q(str(c.rootfs.path))} {r}"]
        mounts = sorted(c.spec.get("volumeMounts") or [], key=lambda m: m["mountPath"].count("/"))
        for m in mounts:
            src = volumes[m["name"]] / m["subPath"] if m.get("subPath") else volumes[m["name"]]
            dst = r + q(in_root(c.rootfs.path, m["mountPath"]))
            if src.is_dir():
                lines.append(f"mkdir -p {dst}")
            else:
                lines += [f"mkdir -p $(dirname {dst})", f"touch {dst}"]
            lines.append(f"mount --bind {q(str(src))} {dst}")
            if m.get("readOnly"):
                lines.append(f"mount -o remount,bind,ro {dst}")
        for name in ("hosts", "hostname"):
            lines.append(
                f"touch {r}/etc/{name} && mount --bind {q(str(etc / name))} {r}/etc/{name}"
            )
        lines += [
            f"mount -t proc -o nosuid,nodev,noexec proc {r}/proc",
            f"mount -t tmpfs -o nosuid,mode=755,size=65536k tmpfs {r}/dev",
            *(f"touch {r}/dev/{d} && mount --bind /dev/{d} {r}/dev/{d}" for d in DEV_NODES),
            f"mkdir {r}/dev/shm && mount -t tmpfs -o nosuid,nodev,noexec,size=65536k shm {r}/dev/shm",
            f"ln -s /proc/self/fd {r}/dev/fd",
            "hostname torchserve-0",
            f"mount -o remount,bind,ro {r}",  # readOnlyRootFilesystem: the volumes stay as mounted
        ]
        user = [
            "/usr/bin/setpriv",
            f"--reuid={c.uid}",
            f"--regid={c.gid}",
            f"--groups={c.fs_group}",
            "--no-new-privs",
            "--bounding-set=-all",
            "--inh-caps=-all",
            "--",
            "/usr/bin/env",
            "-i",
            *(f"{k}={v}" for k, v in c.env.items()),
            "/bin/sh",
            "-c",
            'cd "$0" && exec "$@"',
            c.workdir,
            *argv,
        ]
        lines.append("exec chroot " + r + " " + " ".join(q(a) for a in user))
        unshare = ["unshare", "--mount", "--pid", "--uts", "--ipc", "--fork", "--kill-child"]
        unshare += ["--propagation", "private", "--", "/bin/sh", "-c", "\n".join(lines)]
        with open(c.log, "ab") as log:
            c.process = subprocess.Popen(unshare, stdout=log, stderr=subprocess.STDOUT)

    # --- probes, termination ---------------------------------------------------------------------
    def probe(self, container: str, kind: str) -> subprocess.CompletedProcess | None:
        """The container's `kind` probe (startupProbe, readinessProbe, livenessProbe) as the
        kubelet execs it; None where it has none."""
        spec = self.spec(container).get(kind)
        if not spec:
            return None
        timeout = float(spec.get("timeoutSeconds", 1))
        if "exec" in spec:
            return self.containers[container].exec(spec["exec"]["command"], timeout=timeout)
        check = spec.get("tcpSocket") or spec["httpGet"]
        port = check["port"]
        if isinstance(port, str):  # a named containerPort
            (port,) = [
                p["containerPort"] for p in self.spec(container)["ports"] if p["name"] == port
            ]
        try:  # the kubelet's tcpSocket and httpGet checks, on the pod's loopback
            if "tcpSocket" in spec:
                socket.create_connection(("127.0.0.1", port), timeout=timeout).close()
            else:
                url = f"http://127.0.0.1:{port}{check.get('path', '/')}"
                urllib.request.urlopen(url, timeout=timeout).close()
        except OSError as e:
            return subprocess.CompletedProcess([], 1, "", repr(e))
        return subprocess.CompletedProcess([], 0, "", "")

    def wait_ready(self, timeout: float) -> float:
        """Seconds from start until every container's startup and readiness probes pass."""
        deadline = self.started + timeout
        for name in self.containers:
            for kind in ("startupProbe", "readinessProbe"):
                while True:
                    for c in self.containers.values():
                        assert c.process is not None
                        if c.process.poll() is not None:
                            raise RuntimeError(
                                f"{c.name} exited {c.process.returncode}\n{self.tail()}"
                            )
                    try:
                        out = self.probe(name, kind)
                    except subprocess.TimeoutExpired:
                        out = subprocess.CompletedProcess([], 1, "", "probe timed out")
                    if out is None or out.returncode == 0:
                        break
                    if time.monotonic() > deadline:
                        raise TimeoutError(
                            f"{name} {kind}: {out.stdout}{out.stderr}\n{self.tail()}"
                        )
                    time.sleep(1)
        return time.monotonic() - self.started

    def terminate(self) -> dict[str, Any]:
        """What the kubelet does to a deleted pod: each container's preStop hook, then SIGTERM to
        its PID 1, SIGKILL once the grace period is spent. Per container: exit status, seconds
        from SIGTERM to exit, and whether it outlived the grace period."""
        began = time.monotonic()

        def pre_stop(c: Container) -> subprocess.Popen | None:
            hook = (c.spec.get("lifecycle") or {}).get("preStop")
            if not hook:
                return None
            argv = ["nsenter", "--target", str(c.pid1), "--mount", "--uts", "--ipc", "--pid"]
            argv += ["--root", "--wd", "--setuid", str(c.uid), "--setgid", str(c.gid), "--"]
            return subprocess.Popen([*argv, *hook["exec"]["command"]])

        hooks = {name: pre_stop(c) for name, c in self.containers.items()}
        out: dict[str, Any] = {}
        signalled = {}
        for name, c in self.containers.items():
            hook = hooks[name]
            if hook is not None:
                hook.wait(timeout=self.grace)
            signalled[name] = time.monotonic()
            assert c.process is not None
            if c.process.poll() is None:  # a preStop hook may have ended it (nginx's quit)
                with contextlib.suppress(RuntimeError, ProcessLookupError):
                    os.kill(c.pid1, signal.SIGTERM)
        for name, c in self.containers.items():
            assert c.process is not None
            left = self.grace - (time.monotonic() - began)
            try:
                status = c.process.wait(timeout=max(left, 0.1))
                killed = False
            except subprocess.TimeoutExpired:
                c.process.kill()  # --kill-child: PID 1 and with it the namespace
                status, killed = c.process.wait(timeout=30), True
            out[name] = {
                "status": status,
                "seconds_after_sigterm": round(time.monotonic() - signalled[name], 1),
                "killed_at_grace": killed,
            }
        return out

    def close(self) -> None:
        for c in self.containers.values():
            if c.process is not None and c.process.poll() is None:
                # PID 1 first, which ends its namespace: unshare's --kill-child signal does not
                # survive setpriv's change of user, so killing unshare alone leaves the container
                # running (a test that failed mid-pod left its servers behind).
                with contextlib.suppress(RuntimeError, ProcessLookupError):
                    os.kill(c.pid1, signal.SIGKILL)
                c.process.kill()
                c.process.wait(timeout=30)
        for name in self.containers:
            subprocess.run(["umount", "-R", str(self.root / "mnt" / name)], capture_output=True)
        self._stack.close()

    def tail(self, n: int = 30) -> str:
        lines = []
        for c in self.containers.values():
            if c.log.exists():
                lines += [f"--- {c.name}"] + c.log.read_text(errors="replace").splitlines()[-n:]
        return "\n".join(lines)
