#!/usr/bin/env bash
# Wheels of the handlers' small dependencies (pydantic, orjson, PyYAML, threadpoolctl and theirs) for
# a bare CUDA machine's Python, which has torch but not these and no network: carry the folder there
# and bench/gpu_check.sh installs them into a temporary folder (WHEELS=build/gpu-wheels).
#   bash bench/gpu_wheels.sh [PYTHON_VERSION, default 3.12] [DIR, default build/gpu-wheels]
# The versions are requirements-serve.txt's pins, so the check runs the code the images run.
set -euo pipefail
cd "$(dirname "$0")/.."
PYVER="${1:-3.12}"
DIR="${2:-build/gpu-wheels}"
PIP="${PIP:-.venv/bin/pip}"
PINS=$(grep -iE '^(pydantic|orjson|PyYAML|threadpoolctl)==' requirements-serve.txt)
mkdir -p "$DIR"
# shellcheck disable=SC2086  # one argument per pin
"$PIP" download --quiet --only-binary=:all: --python-version "$PYVER" \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
    -d "$DIR" $PINS
ls "$DIR"
