# Two commands do all setup:  make lab  (open the course)   make test  (run every test)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip
STAMP  := $(VENV)/.installed-stamp
PORT   ?= 8888
PLAYWRIGHT := 1.65.2
NBVAL  := --nbval --nbval-sanitize-with tests/nbval_sanitize.cfg --nbval-current-env
# JupyterLab's settings defaults for this course (no "Jupyter news" pop-up), read from the venv.
LAB_OVERRIDES := $(VENV)/share/jupyter/lab/settings/overrides.json

# Which PyTorch build: the pin comes from requirements.txt. Without an NVIDIA GPU on Linux, pip's
# default for the pin is the CUDA build (several GB); PyTorch's CPU index has the small CPU build.
TORCH_PIN       := $(shell sed -n 's/^torch==\([0-9.]*\).*/\1/p' requirements.txt)
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
NVIDIA_SMI      ?= nvidia-smi

# Prints the install commands, with '#' lines saying why. Decided in order, cheapest first:
#   1. an NVIDIA GPU answers `nvidia-smi -L`, or not Linux -> pip's default build
#   2. PyTorch's CPU index does not answer within 5 s -> pip's default build, quietly
#   3. the pin is already installed, or a local wheel (pip's --find-links) provides it -> used as is
#   4. otherwise -> torch from the CPU index first, then the rest as usual
# The index never goes into requirements.txt: pip would ask it for every package, and retry it
# for a minute where it is unreachable.
define INSTALL_PLAN
if $(NVIDIA_SMI) -L >/dev/null 2>&1; then \
	echo "# torch $(TORCH_PIN): NVIDIA GPU found, pip's default build (CUDA)"; \
elif [ "$$(uname -s)" != Linux ]; then \
	echo "# torch $(TORCH_PIN): pip's default build ($$(uname -s) has no separate CPU build)"; \
elif ! timeout 5 $(BIN)/python -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=4)' \
		$(TORCH_CPU_INDEX)/torch/ >/dev/null 2>&1; then \
	echo "# torch $(TORCH_PIN): no NVIDIA GPU, $(TORCH_CPU_INDEX) unreachable: pip's default build"; \
elif $(PIP) install --dry-run --no-deps --no-index --quiet torch==$(TORCH_PIN) >/dev/null 2>&1; then \
	echo "# torch $(TORCH_PIN): installed already or a local wheel provides it, used as is"; \
else \
	echo "# torch $(TORCH_PIN): no NVIDIA GPU, the CPU build from $(TORCH_CPU_INDEX)"; \
	echo "$(PIP) install --quiet torch==$(TORCH_PIN) --extra-index-url $(TORCH_CPU_INDEX)"; \
fi; \
echo "$(PIP) install --quiet -r requirements.txt"
endef

.PHONY: venv lab test test-portable test-browser install-plan playwright notebooks html peers costs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): requirements.txt pyproject.toml | $(BIN)/python
	$(PIP) install --quiet --upgrade pip
	@{ $(INSTALL_PLAN); } > $(VENV)/.install-plan
	@cat $(VENV)/.install-plan
	sh -e $(VENV)/.install-plan
	@touch $(STAMP)

$(LAB_OVERRIDES): notebooks/.lab-settings/overrides.json | $(STAMP)
	@mkdir -p $(@D)
	cp $< $@

venv: $(STAMP) $(LAB_OVERRIDES)

# Dry run: print the commands `make` would run to install the packages (creates only the bare venv).
install-plan: | $(BIN)/python
	@$(INSTALL_PLAN)

# JupyterLab refuses to run as root without --allow-root; add it only when we are root.
lab: $(STAMP) $(LAB_OVERRIDES)
	$(BIN)/jupyter lab --notebook-dir=notebooks --port=$(PORT) \
		$$( [ "$$(id -u)" = 0 ] && echo --allow-root )

# tests/test_browser.py runs here too when Playwright and Debian's chromium are installed
# (`make test-browser` or .ci/run installs Playwright); otherwise pytest reports it skipped.
test: $(STAMP) $(LAB_OVERRIDES)
	COURSE_CLAIMS=strict $(BIN)/python -m pytest -q tests notebooks $(NBVAL)

# The same checks on another float path: ATen's plain (non-vectorised) kernels, the float path of a CPU
# without AVX2. Every stored output and claim must hold there too. .ci/run runs it after `make test`.
# Left out: the browser, offline-edition, install and lock checks, which compute no float.
FLOAT_PATH ?= ATEN_CPU_CAPABILITY=default
test-portable: $(STAMP) $(LAB_OVERRIDES)
	env $(FLOAT_PATH) COURSE_CLAIMS=strict $(BIN)/python -m pytest -q tests notebooks $(NBVAL) \
		--ignore=tests/test_browser.py --ignore=tests/test_html.py --ignore=tests/test_makefile.py

# Playwright in the venv, for tests/test_browser.py (it drives Debian's chromium, never downloads one).
playwright: $(STAMP)
	$(PIP) install --quiet playwright==$(PLAYWRIGHT)

# The real-browser check alone.
test-browser: playwright $(LAB_OVERRIDES)
	@command -v chromium >/dev/null || { echo "needs Debian's chromium: apt-get install chromium"; exit 1; }
	$(BIN)/python -m pytest -q tests/test_browser.py

# Re-execute every chapter in place and store its outputs (after changing a notebook or course_lib).
notebooks: $(STAMP)
	for nb in notebooks/*.ipynb; do COURSE_CLAIMS=strict \
		$(BIN)/jupyter nbconvert --to notebook --execute --inplace \
			--ExecutePreprocessor.timeout=600 "$$nb" || exit 1; done

# The offline HTML edition: every chapter with its stored outputs under site/, readable from disk with
# no network (npm fetches the widget renderer, require.js and MathJax once into site/vendor).
html: $(STAMP)
	$(BIN)/python -m course_lib.site site

# course_lib against verl 0.9.1's own functions. Installs verl without its heavy extras (vLLM, flash-attn,
# a CUDA torch) plus what its loss module imports, then refreshes the table chapter 09 shows.
peers: $(STAMP)
	$(PIP) install --quiet --no-deps verl==0.9.1
	$(PIP) install --quiet -r tests/peers-requirements.txt
	PEERS_RECORD=notebooks/data/verl_agreement.json $(BIN)/python -m pytest -q tests/test_peer_verl.py

# Each chapter's wall time and peak memory under the nbval check, written into the README's table.
costs: $(STAMP)
	$(BIN)/python benchmarks/chapter_costs.py --write-readme

clean:
	rm -rf $(VENV) .pytest_cache site
