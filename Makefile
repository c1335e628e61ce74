# posenc: the two commands a newcomer needs are `make lab` and `make test`.
# Both create .venv on first use and install exactly the versions in the lock
# (requirements/lab.txt, requirements/test.txt), reinstalling when the lock changes.
PYTHON ?= python3
VENV ?= .venv
# torch is the one package the lock leaves out: its CPU wheel (on local disk here) by default;
# on a CUDA machine use e.g.
#   make test TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/<cuda tag>"
TORCH_VERSION := 2.13.0
TORCH_SPEC ?= torch==$(TORCH_VERSION)
BIN := $(VENV)/bin
LAB_LOCK := requirements/lab.txt
TEST_LOCK := requirements/test.txt
LAB_STAMP := $(VENV)/.posenc-lab
TEST_STAMP := $(VENV)/.posenc-test
# Extra arguments for JupyterLab, e.g. LAB_ARGS="--port 8899 --no-browser"
# (JupyterLab also reads JUPYTER_PORT: `JUPYTER_PORT=8899 make lab`).
LAB_ARGS ?=
# JupyterLab refuses to start as root (a container, a cloud VM, a lab PC) unless told
# to; the server stays on 127.0.0.1 behind a random token either way.
LAB_ROOT_ARG = $(if $(filter 0,$(shell id -u)),--allow-root)
# Extra arguments for pytest, e.g. PYTEST_ARGS="-k rope -x".
PYTEST_ARGS ?=
# The maintainer's tools: uv writes the lock (`make lock`), in a venv of its own.
UV_SPEC ?= uv==0.13.9
TOOLS := .venv-tools
LATEST := .venv-latest

.PHONY: venv lab test test-gpu test-lib test-latest lock notebooks zh zh-status slides site student images clean bench

# --no-deps: the lock names every package, so pip installs it and nothing else; then torch
# (whose own dependencies the lock already pins), then posenc_lib itself, built with the
# locked setuptools; `pip check` fails the install if anything is inconsistent.
$(LAB_STAMP): $(LAB_LOCK) pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --no-deps -r $(LAB_LOCK)
	$(BIN)/python -m pip install --quiet $(TORCH_SPEC)
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	$(BIN)/python -m pip check
	touch $@

# The test tools on top of the learner's set (the same versions for what both hold).
$(TEST_STAMP): $(TEST_LOCK) $(LAB_STAMP)
	$(BIN)/python -m pip install --quiet --no-deps -r $(TEST_LOCK)
	$(BIN)/python -m pip check
	touch $@

# Create or update the virtual environment.
venv: $(TEST_STAMP)

# Open the notebooks in JupyterLab on localhost (a fresh random token is printed).
lab: $(LAB_STAMP)
	$(BIN)/jupyter lab --notebook-dir=notebooks --ServerApp.ip=127.0.0.1 $(LAB_ROOT_ARG) $(LAB_ARGS)

NBVAL := --nbval-current-env --nbval-sanitize-with notebooks/sanitize.cfg
# Every test: library (unit, property, cross-check, bad input) and notebooks (nbval, strict).
# POSENC_GRADING is a grader's switch (checkers raise) and POSENC_DEVICE a learner's opt-in to an
# accelerator: the stored notebooks expect both off.
test: $(TEST_STAMP)
	env -u POSENC_GRADING -u POSENC_DEVICE $(BIN)/python -m pytest tests notebooks --nbval $(NBVAL) --durations=12 $(PYTEST_ARGS)

# On a machine with an NVIDIA GPU and a CUDA build of torch (TORCH_SPEC): the tests marked gpu
# (CUDA against CPU results, no host synchronisation, torch.compile), every notebook as `make test`
# runs it (the chapters compute on the CPU by default: the stored outputs, strict), then every
# notebook with the GPU opted in (POSENC_DEVICE=cuda: every assert must hold; printed digits may
# differ in rounding, so outputs are not compared: --nbval-lax). CONTRIBUTING.md, "On a GPU".
test-gpu: $(TEST_STAMP)
	$(BIN)/python -m pytest tests -m gpu -rs $(PYTEST_ARGS)
	env -u POSENC_GRADING -u POSENC_DEVICE $(BIN)/python -m pytest notebooks --nbval $(NBVAL) $(PYTEST_ARGS)
	env -u POSENC_GRADING POSENC_DEVICE=cuda $(BIN)/python -m pytest notebooks --nbval-lax $(NBVAL) $(PYTEST_ARGS)

# Library tests only (fast loop while editing posenc_lib).
test-lib: $(TEST_STAMP)
	$(BIN)/python -m pytest tests $(PYTEST_ARGS)

# Benchmarks: ratios measured side by side (RoPE vs the one-pass bound and HF, biased
# attention vs SDPA, widget update times). BENCH_ARGS="--full --compile" for the issue's
# attention sizes and the torch.compile path (slower: compiles, L = 32768).
# DEVICE=cuda: the GPU tables instead (RoPE against a clone and the bound, the Triton kernel,
# HF eager and compiled; ALiBi/T5 against SDPA and FlexAttention, with peak memory; CUDA events,
# median of 25); BENCH_ARGS="--full" adds the longest lengths, "--tune" the Triton launch shapes.
BENCH_ARGS ?=
DEVICE ?= cpu
bench: $(TEST_STAMP)
	$(BIN)/python -m benchmarks.run_all --device $(DEVICE) $(BENCH_ARGS)

# Re-execute every notebook from its source in notebooks/src (NB=05 for one chapter).
notebooks: $(TEST_STAMP)
	$(BIN)/python scripts/build_notebooks.py $(NB)
	$(BIN)/python scripts/i18n.py build $(NB)

# The Chinese edition (notebooks/zh/): the stored English notebooks with their markdown from
# notebooks/i18n/zh/ (code cells and outputs copied, nothing executed). `make zh-status` lists the
# stale and untranslated cells with the English diff (CONTRIBUTING.md, "The Chinese edition").
zh:
	$(PYTHON) scripts/i18n.py build $(NB)

zh-status:
	$(PYTHON) scripts/i18n.py status $(NB)

# The offline reveal.js/require.js/jQuery/MathJax copies (package.json, pinned by package-lock.json).
node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

# Slide decks (reveal.js) of every notebook into build/slides/, opening with no network
# (NB=05 for one chapter). Open build/slides/index.html.
slides: $(TEST_STAMP) node_modules/.package-lock.json
	$(BIN)/python scripts/build_slides.py $(NB)

# The course website into build/site/ (open build/site/index.html, or serve the folder): one page
# per notebook from its stored outputs, search, MathJax and widgets that move without a kernel
# (frames precomputed with posenc_lib: scripts/build_site.py); no network beyond `npm ci`.
# Its "Launch on Binder" / "Open in Colab" links open REPO_URL (a GitHub repository; default:
# pyproject.toml's [project.urls] Repository) at REPO_BRANCH. SITE_ARGS="--max-frames 80" etc.
REPO_URL ?=
REPO_BRANCH ?= main
SITE_ARGS ?=
site: $(TEST_STAMP) node_modules/.package-lock.json
	$(BIN)/python scripts/build_site.py $(if $(REPO_URL),--repo-url "$(REPO_URL)") --branch "$(REPO_BRANCH)" $(SITE_ARGS)

# Students' copies for a graded class: build/student/NN_name.ipynb with the solutions removed
# (nbgrader generate_assignment; NB=05 for one chapter). The nbgrader course it leaves in
# COURSE is where `nbgrader autograde` grades submissions (TEACHING.md: Student copies and grading with nbgrader);
# `make clean` deletes build/, so give a real class's course a home outside it.
COURSE ?= build/nbgrader
student: $(TEST_STAMP)
	$(BIN)/python scripts/make_student.py --course "$(COURSE)" $(NB)

# Regenerate every figure in images/ from posenc_lib.
images: $(TEST_STAMP)
	$(BIN)/python scripts/make_images.py

# Refresh the lock to the newest releases (then `make test`, and rebuild the notebooks:
# CONTRIBUTING.md, "Moving the lock"). Needs the package index; changes only requirements/.
lock: $(TOOLS)/bin/uv
	$(TOOLS)/bin/python scripts/lock.py --uv $(TOOLS)/bin/uv --torch $(TORCH_VERSION)

$(TOOLS)/bin/uv:
	test -x $(TOOLS)/bin/python || $(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/python -m pip install --quiet $(UV_SPEC)

# The maintainer's early warning (not part of `make test`): a separate venv with the newest
# release of every package (torch stays TORCH_SPEC), the library tests and nbval there, and a
# drift report (build/latest/drift.md): which versions moved, which tests and cells fail or change.
test-latest:
	rm -rf $(LATEST)
	$(PYTHON) -m venv $(LATEST)
	$(LATEST)/bin/python -m pip install --quiet $(TORCH_SPEC)
	$(LATEST)/bin/python -m pip install --quiet -e ".[lab,test,site]"
	$(LATEST)/bin/python scripts/drift_report.py --lock $(TEST_LOCK) --out build/latest

clean:
	rm -rf $(VENV) $(TOOLS) $(LATEST) build *.egg-info
