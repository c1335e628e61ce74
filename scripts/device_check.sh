#!/bin/bash
# The GPU checks in one call, for a machine whose python3 already has a CUDA torch, Triton and
# transformers but no Jupyter (the lent GPU machines here: no network, so `make test-gpu` cannot
# install the lock). What it lacks travels as wheels in .whl/ (git-ignored), fetched beforehand on a
# machine with the registries:
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#     -d .whl $(grep -E '^(nbval|ipykernel|ipython|ipython-pygments-lexers|jupyter-client|jupyter-core|nbformat|fastjsonschema|jsonschema|jsonschema-specifications|referencing|rpds-py|traitlets|pyzmq|tornado|comm|debugpy|matplotlib-inline|nest-asyncio2|platformdirs|jedi|parso|prompt-toolkit|wcwidth|pexpect|ptyprocess|stack-data|executing|asttokens|pure-eval|ipywidgets|widgetsnbextension|jupyterlab-widgets|transformers)==' requirements/test.txt | cut -d' ' -f1)
# then, there: pip install --no-index --no-deps --target /tmp/site .whl/*.whl; PYTHONPATH=/tmp/site:$PWD
# bash scripts/device_check.sh. Results go to $OUT (or ./device_out): env, gpu tests, bench tables,
# the English notebooks strict on the CPU and on CUDA (stored outputs compared: the CPU run differs
# only in torch's version line when the machine's torch is not the lock's).
set -u
OUT=${OUT:-device_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg
T0=$(date +%s)
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import sys,torch,triton,transformers;print(sys.version.split()[0],'torch',torch.__version__,'triton',triton.__version__,'transformers',transformers.__version__)"
} 2>&1 | tee "$OUT/env.txt"
NB="--nbval --nbval-current-env --nbval-sanitize-with notebooks/sanitize.cfg -p no:cacheprovider -q -W ignore::DeprecationWarning"
timeout 200 python3 -m pytest tests/test_gpu.py -m gpu -q -rfs --tb=short -p no:cacheprovider -W ignore::DeprecationWarning -n 4 \
   > "$OUT/gpu_tests.txt" 2>&1; echo "rc=$?" >> "$OUT/gpu_tests.txt"
timeout 240 python3 -m benchmarks.run_all --device cuda > "$OUT/bench.txt" 2>&1; echo "rc=$?" >> "$OUT/bench.txt"
(env -u POSENC_GRADING POSENC_DEVICE=cuda timeout 240 python3 -m pytest notebooks/*.ipynb $NB -n 6 --dist loadfile \
   > "$OUT/nb_cuda.txt" 2>&1; echo "rc=$?" >> "$OUT/nb_cuda.txt") &
(env -u POSENC_GRADING -u POSENC_DEVICE timeout 240 python3 -m pytest notebooks/*.ipynb $NB -n 6 --dist loadfile \
   > "$OUT/nb_cpu.txt" 2>&1; echo "rc=$?" >> "$OUT/nb_cpu.txt") &
wait
for f in gpu_tests nb_cuda nb_cpu; do echo "-- $f"; grep -E "^(FAILED|ERROR)|passed|failed|rc=" "$OUT/$f.txt" | tail -20; done
grep -v "^ " "$OUT/bench.txt" | cut -c1-250
echo "== done ($(( $(date +%s) - T0 )) s)"
