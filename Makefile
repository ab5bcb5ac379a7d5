# Every target sets itself up: a fresh clone needs only python3 (>= 3.11) and make.
.DEFAULT_GOAL := help
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
RUNTIME := $(VENV)/.installed-runtime
STAMP  := $(VENV)/.installed

.PHONY: help venv demo test real-node-test lint typecheck proto helm-chart bench image image-check clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -e 's/:.*## /\t/' | expand -t 12

# Two steps: the daemon's own dependencies (all `make demo` needs), then the test tools on top (everything else).
$(RUNTIME): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip  # 3 s that pay for themselves: the install then takes 50 s, not 75
	$(BIN)/python -m pip install --quiet -e .
	touch $(RUNTIME)

$(STAMP): $(RUNTIME)
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

venv: $(STAMP) ## create .venv and install the package with its test tools (from the Python package index)

demo: $(RUNTIME) ## the plugin and a kubelet stand-in on a simulated node (ARGS="--machine hgx-h100")
	$(BIN)/gpu-device-plugin demo $(ARGS)

lint: $(STAMP) ## ruff check and ruff format --check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP) ## mypy over the package
	$(BIN)/mypy device_plugin testbed

# The suite runs in TEST_WORKERS processes (pytest-xdist), a test file per worker at a time (files share
# cached machines): most tests wait on sockets, subprocesses and threads, so even 2 cores keep 4 workers
# busy. Bytecode is written (the environment may turn it off), once, before the workers start: the suite
# starts ~80 CLI processes, and without .pyc files each would compile every module again.
TEST_WORKERS ?= 4
TEST_SUMMARY := $(CURDIR)/.test-summary  # each part's counts, printed last
test: export PYTHONDONTWRITEBYTECODE :=
test: lint typecheck $(STAMP) ## ruff, mypy and the whole test suite in parallel, then the real node (CI runs exactly this)
	$(BIN)/python -m compileall -q api device_plugin tests benchmarks tools testbed
	rm -f $(TEST_SUMMARY)
	GPU_DEVICE_PLUGIN_TEST_SUMMARY=$(TEST_SUMMARY) \
		$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --ignore=tests/real_node $(PYTEST_ARGS)
	GPU_DEVICE_PLUGIN_TEST_SUMMARY=$(TEST_SUMMARY) $(MAKE) --no-print-directory real-node-test
	@echo "make test:" && cat $(TEST_SUMMARY)

# The real control plane and kubelet (docs/real-node.md), started once for its tests in one process of their
# own; where GPU_DEVICE_PLUGIN_KUBE_BIN or containerd is missing, every test skips and says why.
real-node-test: $(STAMP) ## the tests on a real Kubernetes control plane and node (tests/real_node)
	$(BIN)/python -m pytest -q -p no:xdist tests/real_node

# Regenerate the Helm chart from the kustomize manifests (deploy/helm; needs kubectl), after a change there.
helm-chart: $(STAMP) ## regenerate deploy/helm/gpu-device-plugin from the kustomize manifests
	$(BIN)/python tools/gen_helm_chart.py

# Regenerate the committed gRPC stubs from api/*.proto (device plugin, DRA, plugin registration).
proto: $(STAMP) ## regenerate the committed gRPC stubs from api/*.proto
	$(BIN)/python tools/gen_proto.py

bench: $(STAMP) ## every benchmark, printing its figures against the targets
	$(BIN)/python benchmarks/run_all.py

# The container image, with the first builder that works (deploy/image/pick-builder.sh: docker only when its
# daemon answers, else podman, else buildah; all take `build -t`). BUILDER=... skips the choice. The probe
# runs once, and only when a recipe needs it (the memo below), not on every make.
IMAGE        ?= gpu-device-plugin:$(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
PYTHON_IMAGE ?= $(shell sed -n 's/^ARG PYTHON_IMAGE=//p' Dockerfile)
BUILD_FLAGS  ?=
BUILDER      ?= $(eval BUILDER := $(shell sh deploy/image/pick-builder.sh))$(BUILDER)

image: ## build the container image: make image IMAGE=<registry>/gpu-device-plugin:<tag> [PYTHON_IMAGE=] [BUILD_FLAGS=]
	@test -n "$(BUILDER)" || exit 2
	@echo "make image: building $(IMAGE) with $(BUILDER) on $(PYTHON_IMAGE)"
	$(BUILDER) build --build-arg PYTHON_IMAGE=$(PYTHON_IMAGE) $(BUILD_FLAGS) -t $(IMAGE) .

# Builds the Dockerfile with buildah on a base made from Debian packages, checks that no build secret is left
# in the image, runs it (docs/development.md#the-image-check). Needs root, buildah and debootstrap.
IMAGE_CHECK_ARGS ?=
image-check: $(RUNTIME) ## build the image on a Debian base with buildah, check it holds no build secret, run it
	$(BIN)/python tools/image_check.py $(IMAGE_CHECK_ARGS)

clean: ## remove everything the targets built
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .hypothesis *.egg-info build dist
	find . -name __pycache__ -type d -prune -not -path './.git/*' -exec rm -rf {} +
