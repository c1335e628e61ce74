# posenc: the two commands a newcomer needs are `make lab` and `make test`.
# Both create .venv on first use and reinstall when pyproject.toml changes.
PYTHON ?= python3
VENV ?= .venv
# torch 2.13.0 (CPU) is on local disk here; on a CUDA machine use e.g.
#   make test TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/<cuda tag>"
TORCH_SPEC ?= torch==2.13.0
BIN := $(VENV)/bin
STAMP := $(VENV)/.posenc-installed
# Extra arguments for JupyterLab, e.g. LAB_ARGS="--port 8899 --no-browser"
# (JupyterLab also reads JUPYTER_PORT: `JUPYTER_PORT=8899 make lab`).
LAB_ARGS ?=
# JupyterLab refuses to start as root (a container, a cloud VM, a lab PC) unless told
# to; the server stays on 127.0.0.1 behind a random token either way.
LAB_ROOT_ARG = $(if $(filter 0,$(shell id -u)),--allow-root)
# Extra arguments for pytest, e.g. PYTEST_ARGS="-k rope -x".
PYTEST_ARGS ?=

.PHONY: venv lab test test-lib notebooks slides student images clean bench

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet $(TORCH_SPEC)
	$(BIN)/python -m pip install --quiet -e ".[test,lab]"
	touch $@

# Create or update the virtual environment.
venv: $(STAMP)

# Open the notebooks in JupyterLab on localhost (a fresh random token is printed).
lab: $(STAMP)
	$(BIN)/jupyter lab --notebook-dir=notebooks --ServerApp.ip=127.0.0.1 $(LAB_ROOT_ARG) $(LAB_ARGS)

# Every test: library (unit, property, cross-check, bad input) and notebooks (nbval, strict).
# POSENC_GRADING is a grader's switch (checkers raise): the stored notebooks expect it off.
test: $(STAMP)
	env -u POSENC_GRADING $(BIN)/python -m pytest tests notebooks --nbval --nbval-current-env \
		--nbval-sanitize-with notebooks/sanitize.cfg --durations=12 $(PYTEST_ARGS)

# Library tests only (fast loop while editing posenc_lib).
test-lib: $(STAMP)
	$(BIN)/python -m pytest tests $(PYTEST_ARGS)

# Benchmarks: ratios measured side by side (RoPE vs the one-pass bound and HF, biased
# attention vs SDPA, widget update times). BENCH_ARGS="--full --compile" for the issue's
# attention sizes and the torch.compile path (slower: compiles, L = 32768).
BENCH_ARGS ?=
bench: $(STAMP)
	$(BIN)/python -m benchmarks.run_all $(BENCH_ARGS)

# Re-execute every notebook from its source in notebooks/src (NB=05 for one chapter).
notebooks: $(STAMP)
	$(BIN)/python scripts/build_notebooks.py $(NB)

# The offline reveal.js/require.js/jQuery/MathJax copies (package.json, pinned by package-lock.json).
node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

# Slide decks (reveal.js) of every notebook into build/slides/, opening with no network
# (NB=05 for one chapter). Open build/slides/index.html.
slides: $(STAMP) node_modules/.package-lock.json
	$(BIN)/python scripts/build_slides.py $(NB)

# Students' copies for a graded class: build/student/NN_name.ipynb with the solutions removed
# (nbgrader generate_assignment; NB=05 for one chapter). The nbgrader course it leaves in
# COURSE is where `nbgrader autograde` grades submissions (README: Student copies and grading with nbgrader);
# `make clean` deletes build/, so give a real class's course a home outside it.
COURSE ?= build/nbgrader
student: $(STAMP)
	$(BIN)/python scripts/make_student.py --course "$(COURSE)" $(NB)

# Regenerate every figure in images/ from posenc_lib.
images: $(STAMP)
	$(BIN)/python scripts/make_images.py

clean:
	rm -rf $(VENV) build *.egg-info
