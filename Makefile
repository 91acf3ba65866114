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

install: $(STAMP) ## Make .venv and install the pinned requirements (every target depends on it)

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

bench: archive ## In-process vs served, fp32 and int8 ONNX, REST+gRPC to 32 clients, time breakdown; reports/bench.{json,md,png}
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

test: $(STAMP) lint ## Lint, then the whole test suite (unit + integration against real servers)
	$(PY) -m pytest -q tests

test-unit: $(STAMP) ## Only the plain-module tests
	$(PY) -m pytest -q tests/unit

# checkov pins conflict with requirements.txt (boto3), so it lives in its own venv.
CHECKOV_VENV := .venv-checkov
$(CHECKOV_VENV)/.installed: requirements-checkov.txt
	test -x $(CHECKOV_VENV)/bin/python || $(PYTHON_SYS) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet -r requirements-checkov.txt
	touch $@

k8s: $(STAMP) $(CHECKOV_VENV)/.installed ## Render every k8s overlay; validate (kubernetes-validate strict + checkov)
	$(PY) -m deploy.k8s_check --checkov $(CHECKOV_VENV)/bin/checkov

lint: $(STAMP) ## ruff lint + format check
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

.PHONY: reliability  # a folder of that name exists: never 'up to date'
reliability: $(STAMP) ## Fuzz, fault and security suites against real TorchServe → reports/reliability.md (RELIABILITY_EXAMPLES=1000)
	$(PY) -m reliability

clean: ## Remove built artifacts and archives (keeps .venv)
	rm -rf $(ARTIFACTS) build reports $(STORE)/*.mar
