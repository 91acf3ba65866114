#!/usr/bin/env bash
# GPU checks + in-process GPU bench on a bare CUDA machine (no venv, no network): see
# bench/gpu_check.py. Uses the first Python that can import torch; writes $OUT (default reports/gpu).
# The handlers' small dependencies (pydantic, orjson, ...) come from WHEELS, a folder that
# bench/gpu_wheels.sh fills for that Python, when it lacks them:
#   OUT=/tmp/out WHEELS=build/gpu-wheels bash bench/gpu_check.sh
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-reports/gpu}"
mkdir -p "$OUT"
{ nvidia-smi || echo "nvidia-smi: not found"; } > "$OUT/nvidia-smi.txt" 2>&1
PY=""
for c in python3 python3.12 python3.11 python /opt/conda/bin/python /usr/local/bin/python3; do
  if command -v "$c" >/dev/null 2>&1 && "$c" -c "import torch, numpy" >/dev/null 2>&1; then PY="$c"; break; fi
done
if [ -z "$PY" ]; then
  echo "gpu_check: no Python here can import torch and numpy; nothing to check" | tee "$OUT/gpu_check.md"
  exit 2
fi
DEPS="$PWD"
if [ -n "${WHEELS:-}" ] && ls "$WHEELS"/*.whl >/dev/null 2>&1; then
  DEPS="$PWD:$(mktemp -d)"
  "$PY" -m pip install --quiet --no-index --no-deps --target "${DEPS#*:}" "$WHEELS"/*.whl || exit 2
fi
PYTHONPATH="$DEPS" "$PY" -m pip list 2>/dev/null | grep -iE '^(torch|onnx|onnxruntime.*|transformers|numpy|tokenizers|pydantic) ' > "$OUT/packages.txt"
echo "gpu_check: $PY ($("$PY" --version 2>&1))"
PYTHONPATH="$DEPS" timeout 480 "$PY" bench/gpu_check.py --out "$OUT" "$@" 2>&1 | tee "$OUT/gpu_check.log"
exit "${PIPESTATUS[0]}"
