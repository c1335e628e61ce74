"""Train short, test long: does each positional method work beyond its training length?

    python -m posenc_lib.experiments.extrapolation            # full run -> ./results/, ./images/
    python -m posenc_lib.experiments.extrapolation --jobs 2   # the same numbers, two processes
    python -m posenc_lib.experiments.extrapolation --quick --out /tmp/x   # smoke test
    python -m posenc_lib.experiments.extrapolation --methods irope --jobs 2
        --results results/irope.json --figure /tmp/irope.png   # chapter 8's run (NoPE and RoPE: from this one)
    python -m posenc_lib.experiments.extrapolation --controls   # two more recall controls -> results/recall_controls.json
    ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2 python -m posenc_lib.experiments.extrapolation --kernel-check
        # a few models retrained with other kernels forced -> results/other_kernels.json

Three tasks, so that no single task decides which method "extrapolates":

* **grammar** (local). One fixed table maps every pair of tokens (a, b) to a next token
  T[a, b] (16 tokens, the same table for all sequences); each sequence starts with two
  random tokens and continues with T[x_{t-2}, x_{t-1}], except that with probability 0.25
  a token is replaced by a uniformly random one. Predicting x_t needs the token *just
  before* the current one and nothing far away: a task that suits distance-decaying biases.
* **recall** (long range). A key-value lookup across a gap. A sequence opens with a
  dictionary of 4 entries, each one token "key k holds value v" (8 keys, 8 values; the keys
  of one sequence differ), then filler tokens, then the 4 keys asked in a random order,
  each followed by its value. The model is scored on those 4 values. The gap grows with L:
  the entry a question needs is L - 11 to L - 2 tokens back, so every length beyond the
  training length asks for distances never seen in training. Guessing scores 1/8.
  By construction the distance grows in proportion to L: a method that divides distances
  by L / 64 (position interpolation) brings every lookup back near the far end of the
  training lookups (L - c becomes 64 - 64 c / L: 62.6 to 63.75 at 512, against 53 to 62).
* **recall_anywhere** (long range, no fixed layout). The same lookup, but the dictionary
  sits at a uniformly random place between the start and the questions, in training and in
  evaluation: the model must find an entry 1 to 62 tokens back in training and up to
  L - 2 back beyond it, wherever the dictionary is.

Each method of ``TinyDecoder`` trains at length 64 with the same budget and batches, for
several seeds (model initialisation, data and the grammar's table all follow the seed).
Evaluation at 64, 128, 256 and 512 tokens: the model reads L tokens at once
("nonoverlapping"), and again through a sliding window of 64 tokens (no position beyond 64
is ever used; on recall the window cannot reach the dictionary). RoPE is also evaluated
with PI, NTK and YaRN frequencies for the factor L / 64, without retraining, and iRoPE (if
trained) also with its RoPE layers attending within chunks of 64 tokens ("irope+chunk", as
Llama 4 does; at the training length this is the same model), and with its attention
temperature switched off ("irope+notemp": the temperature first differs from 1 at the last
training position, whose prediction is never scored, so training never shaped it; this
control says what it does). The results file holds every
seed and, per (task, method, length), the accuracies, their mean, min and max over seeds, and
the number of scored answers per seed ("n").

Two controls and a measurement, so that an explanation can be tested, not only told:
* **trained_distances** (both recall tasks): the dictionary placed at L - 64, so that every
  lookup spans 53 to 62 tokens, distances every model met in training, at positions and
  lengths it did not. A method that fails at L but not here fails because of the distance.
* **the sliding window** (above): no position or distance beyond training at all.
* **attention** (per seed, method and length, on the first ``attention_sequences`` test
  sequences, and on as many of the trained_distances control): per layer and head, where the scored predictions' attention goes: ``mass`` on
  the keys the answer needs (recall: the dictionary entry asked for; grammar: the current and
  the previous token), ``far`` on keys 64 or more tokens back (distances never seen in
  training), ``far_gap`` the mean logit of those far keys minus the mean logit of the other
  keys within the trained distances (0 means no preference: a far key takes mass only by its
  number), and for recall ``logit``, the asked entry's logit, and ``rest``, the log-sum-exp of
  every other key's logit: the entry's log-odds is logit - rest.

Two more controls on the dictionary-first recall models (``--controls``, ``run_controls``: the ALiBi and RoPE
models of each seed retrained, the same models as above on the same CPU; about 5 CPU-minutes):
* **banded** (chapter 6): ALiBi on the trained_distances sets with every key 64 or more back masked, so the
  entry pays the trained penalty and nothing far competes with it: what is left of the fall is not dilution. The
  mask in every layer, in one layer only, and in the lookup head alone: whether the far keys cost the lookup
  head's softmax its mass, or the layer before it its context.
* **placement** (chapter 7): RoPE, plain and with each scaling, with the dictionary at evenly spaced places
  from the start to L - 64: whether a scaling's recall follows the lookup distance; and each RoPE pair's term
  of the asked entry's logit at the training length, alone and against the other keys (``pair_logits``): which
  pairs a lookup reads.

Deterministic: fixed seeds and one thread per process; the same config gives the same
numbers with any --jobs, on the same CPU. Not across CPUs: torch picks its vectorised
kernels (AVX2, AVX-512) and MKL its matrix kernels by CPU, which changes the last bits of
training (`environment` in the results file names the CPU the committed numbers came from).
How much that moves the numbers, ``--kernel-check`` measures with another CPU's kernels forced on
this one (``run_kernel_check``, results/other_kernels.json: ALiBi's recall moved by up to 15
answers of 512, the grammar's accuracies of RoPE and ALiBi not at all).
Forcing one code path everywhere (ATEN_CPU_CAPABILITY=default, MKL_CBWR=COMPATIBLE) made a
run three times slower, so the experiment does not. ``plot(results_path, out_png)`` redraws the figure from a results
file (``make images``). Output paths are relative to the working directory (run it from the
repository root to update the committed results); ``load_results`` finds committed ones
from anywhere in the repository.
Taught in: notebooks/07_beyond.ipynb, notebooks/06_alibi.ipynb (the iRoPE run: notebooks/08_rope_in_models.ipynb)
"""
from __future__ import annotations

import argparse
import json

from ... import _validate as v
from ...device import device_named
from ...model import POSITIONAL_METHODS
from .. import _cli
# The package's public names, importable from here as when it was one module (chapters 6-8 and the tests
# use ``posenc_lib.experiments.extrapolation as ex``).
from .config import (FIGURE, QUICK, RECALL_TASKS, RESULTS, TASK_DESCRIPTIONS, TASKS,  # noqa: F401
                     ExperimentConfig, best_accuracy, chance_accuracy, grammar_sequences, grammar_table,
                     key_blind_floor, recall_sequences, recall_vocab, sample)
from .controls import (CONTROLS, KERNELS, PLACEMENTS, banded, pair_logits, placement_starts,  # noqa: F401
                       run_controls, run_controls_seed, run_kernel_check)
from .evaluation import (attention_profile, evaluate, evaluate_full, evaluate_rope_scalings,  # noqa: F401
                         evaluate_sliding, evaluation_sets)
from .figure import COLORS, LABELS, SCALING_STYLES, draw, plot  # noqa: F401
from .reading import (accuracy, attention_heads, compare, load_results, ordering_by_chance,  # noqa: F401
                      separation, separation_of)
from .runner import run, run_seed, summarize  # noqa: F401
from .training import build_model, lr_factor, seed_grammar_table, train  # noqa: F401


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m posenc_lib.experiments.extrapolation",
                                description=__doc__.split("\n\n")[0])
    _cli.add_output_options(p, RESULTS, FIGURE)
    p.add_argument("--steps", type=int, help="override the number of training steps")
    p.add_argument("--methods", help="comma-separated keys of POSITIONAL_METHODS to train instead of the "
                   "default six, e.g. irope (chapter 8's results/irope.json)")
    p.add_argument("--jobs", type=int, default=1, help="processes (the numbers do not depend on it)")
    p.add_argument("--controls", action="store_true",
                   help=f"instead of the experiment, its two recall controls (run_controls) -> {CONTROLS}, no figure")
    p.add_argument("--kernel-check", action="store_true",
                   help=f"instead of the experiment, a few models retrained under this process's kernels "
                        f"(run_kernel_check) -> {KERNELS}, no figure")
    _cli.add_device_option(p)
    args = p.parse_args(argv)
    device = device_named(args.device, "--device")
    cfg = ExperimentConfig(**(QUICK if args.quick else {}))
    if args.controls or args.kernel_check:
        if device.type != "cpu":
            p.error("--controls and --kernel-check run on the CPU (their results compare with the CPU's): drop --device")
        if args.quick and args.out is None and args.results is None:
            p.error("--quick writes throwaway numbers: give --out DIR or --results so results/ stays untouched")
        default = CONTROLS if args.controls else KERNELS
        path = args.results or (default if args.out is None else args.out / default.name)
        path.parent.mkdir(parents=True, exist_ok=True)
        results = (run_controls(cfg, jobs=v.int_at_least("--jobs", args.jobs, 1)) if args.controls
                   else run_kernel_check(cfg))
        path.write_text(json.dumps(results, indent=1) + "\n")
        print(f"wrote {path} (CPU time {results['cpu_time_s']} s)")
        return 0
    json_path, png_path = _cli.output_paths(p, args, RESULTS, FIGURE)
    if args.steps is not None:
        cfg.steps = args.steps
    if args.methods is not None:
        cfg.methods = tuple(v.one_of("--methods", m, POSITIONAL_METHODS) for m in args.methods.split(","))
    jobs = v.int_at_least("--jobs", args.jobs, 1)
    _cli.write(run(cfg, jobs=jobs, device=device), json_path, png_path, plot)
    return 0

