#!/usr/bin/env bash
# Build the serving image with whichever builder this machine has (`make image`, docs/kubernetes.md).
#
#   docker/image.sh builder          print the builder `build` uses: IMAGE_BUILDER, else the first of
#                                    docker (an engine answers), podman, buildah; installs buildah
#                                    from Debian's packages where none is there and apt-get can
#   docker/image.sh build            build docker/Dockerfile.$IMAGE_KIND (cpu) as $IMAGE
#
# Settings (environment; the Makefile passes its variables of the same names):
#   IMAGE            the tag (default torchserve-models:0.1.0-cpu)
#   BASE_IMAGE       the Dockerfile's base (default: its own, python:3.11.14-slim-bookworm). "debian"
#                    builds a stand-in from Debian's packages (debootstrap: bookworm's python3.11,
#                    its venv, ca-certificates) where the registry's base cannot be pulled; empty: the
#                    Dockerfile's base if it can be had, else that stand-in, said in one line
#   TORCH_INDEX_URL  where pip finds the torch +cpu wheel (default: the Dockerfile's, the PyTorch CPU
#                    index); empty: pip's own configuration only (a wheel cache, a mirror)
#   IMAGE_PIP_ACCESS host (the default where the builder can mount): the build's pip steps get this
#                    machine's pip configuration (`pip config list`: indexes, find-links, CA bundle,
#                    constraints), its files mounted read-only for the RUN steps and never part of a
#                    layer, as behind a proxy or a mirror; none: the image's pip as it comes
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE_KIND="${IMAGE_KIND:-cpu}"
IMAGE="${IMAGE:-torchserve-models:0.1.0-$IMAGE_KIND}"
DOCKERFILE="docker/Dockerfile.$IMAGE_KIND"
STANDIN=localhost/python-debian:3.11-bookworm

say() { echo "image: $*" >&2; }

pick_builder() {
    if [ -n "${IMAGE_BUILDER:-}" ]; then
        command -v "$IMAGE_BUILDER" >/dev/null || { say "IMAGE_BUILDER=$IMAGE_BUILDER is not installed"; exit 2; }
        echo "$IMAGE_BUILDER"
        return
    fi
    # docker's client alone builds nothing: its engine must answer.
    if command -v docker >/dev/null && docker info >/dev/null 2>&1; then echo docker; return; fi
    if command -v podman >/dev/null; then echo podman; return; fi
    if command -v buildah >/dev/null; then echo buildah; return; fi
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        say "no image builder (docker engine, podman, buildah): installing Debian's buildah"
        apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq buildah debootstrap >&2
        echo buildah
        return
    fi
    say "no image builder: install docker (with its engine), podman or buildah (as root on Debian/Ubuntu: apt-get install buildah debootstrap), or set IMAGE_BUILDER"
    exit 2
}

has_image() { # has_image BUILDER NAME
    case "$1" in
        buildah) buildah inspect --type image "$2" >/dev/null 2>&1 ;;
        *) "$1" image inspect "$2" >/dev/null 2>&1 ;;
    esac
}

# The stand-in base: Debian bookworm (minbase) with its python3.11, venv and CA certificates: what
# the Dockerfile needs of python:3.11.14-slim-bookworm (`python -m venv`, apt-get), made from
# Debian's packages alone (python3-distutils: python3.11-venv needs python3.11-distutils, a name
# only it provides, which debootstrap does not resolve). Built once per builder's storage;
# DEBIAN_MIRROR names another mirror.
debian_base() {
    local builder=$1 ctr mnt
    has_image "$builder" "$STANDIN" && return
    command -v debootstrap >/dev/null || {
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
            apt-get install -y -qq debootstrap >&2
        else
            say "the Debian stand-in base needs debootstrap (apt-get install debootstrap), as root"; exit 2
        fi
    }
    root=$(mktemp -d "${TMPDIR:-/var/tmp}/python-debian.XXXXXX")
    trap 'rm -rf "${root:-}" "${run:-}"' EXIT # root, run: globals, read at exit
    say "making $STANDIN from Debian's packages in $root"
    local mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
    debootstrap --variant=minbase --include=python3.11,python3.11-venv,python3-distutils,python-is-python3,ca-certificates \
        bookworm "$root" "$mirror" >&2 || {
        local status=$?
        [ ! -f "$root/debootstrap/debootstrap.log" ] || tail -n 20 "$root/debootstrap/debootstrap.log" >&2
        say "debootstrap could not make $STANDIN from $mirror (exit $status; its log's last lines above): is the mirror reachable from here (DEBIAN_MIRROR names another)? Or set BASE_IMAGE to a Python 3.11 image this builder has"
        exit 2
    }
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb
    case "$builder" in
        buildah)
            ctr=$(buildah from scratch)
            mnt=$(buildah mount "$ctr")
            cp -a "$root"/. "$mnt"/
            buildah umount "$ctr" >/dev/null
            buildah config --env LANG=C.UTF-8 --cmd python3 "$ctr"
            buildah commit --quiet --rm "$ctr" "$STANDIN" >/dev/null
            ;;
        *) tar -C "$root" -c . | "$builder" import --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' - "$STANDIN" >/dev/null ;;
    esac
    rm -rf "$root"
}

timed() { # timed WHAT COMMAND...: run it, then say how long it took
    local started=$SECONDS
    "${@:2}"
    say "$1 took $(((SECONDS - started) / 60)) min $(((SECONDS - started) % 60)) s"
}

build() {
    local builder base wanted line
    builder=$(pick_builder)
    wanted=$(sed -n 's/^ARG BASE_IMAGE=//p' "$DOCKERFILE")
    base="${BASE_IMAGE:-}"
    if [ -z "$base" ]; then
        if has_image "$builder" "$wanted" || "$builder" pull -q "$wanted" >/dev/null 2>&1; then
            base=$wanted
        else
            say "$wanted cannot be pulled here: building on $STANDIN, made from Debian's packages (BASE_IMAGE=debian)"
            base=debian
        fi
    fi
    if [ "$base" = debian ]; then
        timed "the Debian base" debian_base "$builder"
        base=$STANDIN
    fi
    local args=(-f "$DOCKERFILE" -t "$IMAGE" --build-arg "BASE_IMAGE=$base")
    case "$builder" in
        # --layers: every step's result is cached in the builder's storage, so a rebuild with the
        # same requirements reuses the venvs. chroot isolation: no runtime (crun, runc) needed.
        # The Dockerfile's own ignore file, which docker's BuildKit finds beside it by name.
        buildah) args+=(--layers --isolation "${BUILDAH_ISOLATION:-chroot}" --ignorefile "$DOCKERFILE.dockerignore") ;;
        podman) args+=(--layers --ignorefile "$DOCKERFILE.dockerignore") ;;
    esac
    # docker's build runs no bind mounts: there the daemon's own network and mirrors are used.
    if [ "$builder" != docker ] && [ "${IMAGE_PIP_ACCESS:-host}" = host ]; then
        run=$(mktemp -d "${TMPDIR:-/tmp}/image-pip.XXXXXX") # global: the EXIT trap reads it
        trap 'rm -rf "${root:-}" "${run:-}"' EXIT
        while IFS= read -r line; do
            case "$line" in
                TORCH_INDEX_URL=)
                    if [ -z "${TORCH_INDEX_URL+set}" ]; then
                        say "the pinned torch wheel is in pip's find-links here: the PyTorch CPU index is not asked (TORCH_INDEX_URL=)"
                        TORCH_INDEX_URL=
                    fi
                    ;;
                *) args+=("$line") ;;
            esac
        done < <(python3 docker/pip_access.py "$run" requirements-serve.txt)
    fi
    [ -z "${TORCH_INDEX_URL+set}" ] || args+=(--build-arg "TORCH_INDEX_URL=$TORCH_INDEX_URL")
    say "$builder build ${args[*]} ."
    local started=$SECONDS status=0
    "$builder" build "${args[@]}" . || status=$?
    if [ "$status" != 0 ]; then
        say "$builder build failed (exit $status) at the step printed last above: a RUN's pip or apt-get cannot reach its index or mirror (IMAGE_PIP_ACCESS, TORCH_INDEX_URL), or the disk under the builder's storage is full"
        exit "$status"
    fi
    say "$builder build took $(((SECONDS - started) / 60)) min $(((SECONDS - started) % 60)) s"
}

# The image's size by layer, package list (name, version, licence) and checks (no root user, no
# compiler): docker/image_report.py reads them from the image's files, into reports/image/.
report() {
    local out=reports/image ctr mnt status=0
    if ! command -v buildah >/dev/null || ! buildah inspect --type image "$IMAGE" >/dev/null 2>&1; then
        say "report: reads the image from buildah's (podman's) storage; $IMAGE is not there"
        return 2
    fi
    mkdir -p "$out"
    buildah inspect --type image "$IMAGE" > "$out/inspect.json"
    ctr=$(buildah from --pull=false --quiet "$IMAGE")
    mnt=$(buildah mount "$ctr")
    python3 docker/image_report.py "$IMAGE" "$mnt" "$out/inspect.json" "$out" > /dev/null || status=$?
    buildah rm "$ctr" >/dev/null
    say "$IMAGE: $(python3 docker/image_report.py --line "$out/summary.json"); $out/{layers,packages}.tsv"
    return "$status"
}

case "${1:-}" in
    builder) pick_builder ;;
    build)
        timed "make image" build
        [ "$(pick_builder)" = docker ] || report
        ;;
    report) report ;;
    debian-base) debian_base "$(pick_builder)" ;;
    *) echo "usage: $0 builder|build|report|debian-base" >&2; exit 2 ;;
esac
