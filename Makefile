# Two commands do all setup:  make lab  (open the course)   make test  (run every test)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
PORT   ?= 8888
PLAYWRIGHT := 1.65.2
NBVAL  := --nbval --nbval-sanitize-with tests/nbval_sanitize.cfg --nbval-current-env

.PHONY: venv lab test test-browser notebooks clean

$(STAMP): requirements.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	@touch $(STAMP)

venv: $(STAMP)

# JupyterLab refuses to run as root without --allow-root; add it only when we are root.
lab: $(STAMP)
	$(BIN)/jupyter lab --notebook-dir=notebooks --port=$(PORT) \
		$$( [ "$$(id -u)" = 0 ] && echo --allow-root )

test: $(STAMP)
	$(BIN)/python -m pytest -q tests notebooks $(NBVAL)

# Optional: drive JupyterLab in a real browser (Debian's chromium; Playwright never downloads one).
test-browser: $(STAMP)
	@command -v chromium >/dev/null || { echo "needs Debian's chromium: apt-get install chromium"; exit 1; }
	$(BIN)/python -m pip install --quiet playwright==$(PLAYWRIGHT)
	$(BIN)/python -m pytest -q tests/test_browser.py

# Re-execute every chapter in place and store its outputs (after changing a notebook or course_lib).
notebooks: $(STAMP)
	for nb in notebooks/*.ipynb; do \
		$(BIN)/jupyter nbconvert --to notebook --execute --inplace "$$nb" || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache
