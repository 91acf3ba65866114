# The index of what can be done here. `make help` lists the targets.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON_SYS ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
ARTIFACTS := artifacts
STORE := model_store
MODELS := sentiment frequency
export PYTHONPATH := $(CURDIR)
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: help install train archive serve metrics stop test test-unit lint clean publish pull k8s loadtest bench

help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON_SYS) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m clients.protogen
	touch $@

install: $(STAMP) haproxy ## Make .venv and install the pinned requirements (every target depends on it)

# HAProxy is the pod proxy (docker/haproxy.cfg); the tests and `make rehearse` run the real binary.
.PHONY: haproxy
haproxy:
	@command -v haproxy >/dev/null || (apt-get update && apt-get install -y haproxy)

# Training writes artifacts/<model>/ and, last, manifest.json: only a complete, parity-checked
# export has one, so `make train` trains just what is missing.
$(ARTIFACTS)/%/manifest.json: | $(STAMP)
	$(PY) -m training.$* --out $(ARTIFACTS)/$*

train: $(foreach m,$(MODELS),$(ARTIFACTS)/$(m)/manifest.json) ## Train and export what is missing (parity-gated)

$(STORE)/%.mar: $(ARTIFACTS)/%/manifest.json $(wildcard handlers/*.py handlers/*/*.py) | $(STAMP)
	$(PY) -m deploy.archive $* --artifacts $(ARTIFACTS)/$* --out $(STORE)

archive: $(foreach m,$(MODELS),$(STORE)/$(m).mar) ## Build model_store/<model>.mar with torch-model-archiver

serve: archive ## Train what is missing, archive, start TorchServe in the background
	$(VENV)/bin/torchserve --start --ts-config config.properties --ncs
	$(PY) -m deploy.wait_ready --config config.properties $(MODELS)

metrics: ## Show the custom handler metrics of the local TorchServe (docs/observability.md)
	curl -sf http://127.0.0.1:8082/metrics | grep -E '^ts_handler_|^ts_inference_requests_total'

stop: ## Stop TorchServe
	-$(VENV)/bin/torchserve --stop

# Load test and benchmark (docs/clients.md). LOADTEST_ARGS e.g. "--shape spike --slo-p95-ms 1500".
LOADTEST_ARGS ?=
loadtest: $(STAMP) ## Locust, headless, REST+gRPC users against `make serve`; SLO gate; reports/loadtest*
	mkdir -p reports
	$(VENV)/bin/locust -f loadtests/locustfile.py --headless --only-summary --csv reports/loadtest --html reports/loadtest.html $(LOADTEST_ARGS)

bench: archive ## In-process vs served throughput/latency, TorchScript and ONNX; reports/bench.{json,md}
	$(PY) -m bench $(BENCH_ARGS)

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

pull: $(STAMP) ## Pull MODEL at VERSION (else STAGE, default production) into model_store/, sha256-verified
	@test -n "$(BUCKET)" || { echo "set BUCKET=<bucket> (or MODEL_BUCKET)" >&2; exit 2; }
	for m in $(MODEL); do $(PY) -m deploy pull $$m $(if $(VERSION),--version $(VERSION),--stage $(STAGE)) --dest $(STORE) $(S3_ARGS); done

test: $(STAMP) haproxy lint ## Lint, the unit tier (stops at the first failure), then the whole suite against real servers
	$(PY) -m pytest -q -x tests/unit
	$(PY) -m pytest -q tests/integration

test-unit: $(STAMP) ## Only the plain-module tests
	$(PY) -m pytest -q tests/unit

# checkov pins conflict with requirements.txt (boto3), so it lives in its own venv.
CHECKOV_VENV := .venv-checkov
$(CHECKOV_VENV)/.installed: requirements-checkov.txt
	test -x $(CHECKOV_VENV)/bin/python || $(PYTHON_SYS) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet -r requirements-checkov.txt
	touch $@

k8s: $(STAMP) $(CHECKOV_VENV)/.installed ## Refresh k8s/base/config/config.properties, render every overlay, validate (strict schemas, KEDA CRD, checkov): summary + failures
	$(PY) -m deploy.k8s_check --checkov $(CHECKOV_VENV)/bin/checkov

lint: $(STAMP) ## ruff lint + format check, mypy over handlers/ deploy/ clients/ training/ (pyproject.toml)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

.PHONY: fmt
# The same checks as git hooks, once per clone: .venv/bin/pre-commit install (.pre-commit-config.yaml).
fmt: $(STAMP) ## Format and autofix with ruff (what `make lint` then checks)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# REHEARSE_ARGS e.g. "--users 8 --pre-stop-s 5"; --no-frequency-streams skips the stream check.
REHEARSE_ARGS ?=
.PHONY: rehearse
rehearse: $(STAMP) haproxy ## Two replicas behind HAProxy under Locust: rolling restart, kill, frequency streams → reports/rehearsal.{md,json}
	$(PY) -m rehearsal $(REHEARSE_ARGS)

.PHONY: reliability  # a folder of that name exists: never 'up to date'
reliability: $(STAMP) ## Fuzz, fault, security suites + mixed-load overload run → reports/reliability.md, overload.md
	$(PY) -m reliability

clean: ## Remove built artifacts and archives (keeps .venv)
	rm -rf $(ARTIFACTS) build reports $(STORE)/*.mar
