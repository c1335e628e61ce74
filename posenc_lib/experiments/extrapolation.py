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
import sys
import time
from contextlib import contextmanager, nullcontext
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Iterable, Iterator

import torch
from torch import Tensor, nn

from .. import _validate as v
from ..device import device_named
from ..model import POSITIONAL_METHODS, DecoderConfig, TinyDecoder, swapped_rotary
from ..scaling import scaled_rope_frequencies
from . import _cli, _training

# Defaults relative to the working directory, not to this file: an installed package
# has no repository around it.
RESULTS = Path("results") / "extrapolation.json"
FIGURE = Path("images") / "extrapolation.png"
TASKS = ("grammar", "recall", "recall_anywhere")
RECALL_TASKS = ("recall", "recall_anywhere")


@dataclass
class ExperimentConfig:
    """Everything that determines the numbers (stored in the results file)."""

    seeds: tuple[int, ...] = (0, 1, 2)
    tasks: tuple[str, ...] = TASKS
    threads: int = 1  # one thread per process: deterministic, and fastest on a busy 2-core machine
    train_len: int = 64
    eval_multiples: tuple[int, ...] = (1, 2, 4, 8)  # evaluate at 64, 128, 256, 512 tokens
    steps: int = 400
    batch_size: int = 32
    lr: float = 3e-3
    warmup: int = 50  # linear warm-up steps, then cosine decay to lr / 10
    eval_sequences: int = 128  # sequences per length and task (recall: 4 answers each, 512 per seed)
    attention_sequences: int = 16  # of those, the ones whose attention is measured
    window_stride: int = 16  # sliding window: each window scores its last 16 tokens
    # grammar
    vocab_size: int = 16  # the grammar's table has vocab_size**2 = 256 entries
    noise: float = 0.25  # probability that a token is random instead of T[x_{t-2}, x_{t-1}]
    # recall
    keys: int = 8
    values: int = 8
    entries: int = 4  # dictionary entries per sequence (distinct keys), each asked once
    fillers: int = 16  # kinds of filler token
    # Chapter 7's six (the committed results); any other key of POSITIONAL_METHODS (e.g. "irope") runs if named.
    methods: tuple[str, ...] = ("none", "learned", "sinusoidal", "rope", "alibi", "t5")
    scalings: tuple[str, ...] = ("linear", "ntk", "yarn")  # applied to the RoPE model at evaluation
    d_model: int = 64
    num_heads: int = 4
    num_layers: int = 2
    d_ff: int = 128


QUICK = dict(seeds=(0, 1), steps=4, batch_size=8, warmup=2, eval_sequences=2, attention_sequences=2)


# ---------------------------------------------------------------- the tasks

def grammar_table(vocab_size: int, generator: torch.Generator) -> Tensor:
    """The grammar: next[a, b] for every pair of tokens. returns (vocab_size, vocab_size) long."""
    return torch.randint(0, vocab_size, (vocab_size, vocab_size), generator=generator)


def grammar_sequences(batch: int, length: int, table: Tensor, noise: float,
                      generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """Sequences x_t = table[x_{t-2}, x_{t-1}], each token replaced by a random one with prob `noise`.

    returns: (tokens (batch, length) long, ruled (batch, length) bool: x_t followed the table)
    """
    V = table.shape[0]
    x = torch.randint(0, V, (batch, length), generator=generator)  # random tokens, used where noise hits
    keep = torch.rand(batch, length, generator=generator) >= noise
    keep[:, :2] = False  # the first two tokens are random
    for t in range(2, length):
        x[:, t] = torch.where(keep[:, t], table[x[:, t - 2], x[:, t - 1]], x[:, t])
    return x, keep


def recall_vocab(cfg: ExperimentConfig) -> dict[str, int]:
    """Where each kind of token starts: entry tokens (key, value) first, then keys, values, fillers."""
    entry = 0
    key = entry + cfg.keys * cfg.values
    value = key + cfg.keys
    filler = value + cfg.values
    return {"entry": entry, "key": key, "value": value, "filler": filler, "size": filler + cfg.fillers}


def recall_sequences(batch: int, length: int, cfg: ExperimentConfig, generator: torch.Generator,
                     start: int | str = 0) -> tuple[Tensor, Tensor]:
    """Dictionary, filler, questions: [filler ...] [e_1 .. e_n] [filler ...] [k_a v_a  k_b v_b ...].

    e_i is one token for (key k_i, value v_i); the n = cfg.entries keys of a sequence differ;
    the questions ask every key once, in a random order. start: where the dictionary begins,
    0 (the classic layout) to length - 3n (right before the questions), or "random": uniform
    over that range, drawn per sequence. The other tokens do not depend on start.
    returns: (tokens (batch, length) long, asked (batch, length) bool: the answers v_a, v_b, ...)
    """
    n = cfg.entries
    gap = v.int_at_least("length", length, 3 * n) - 3 * n
    tok = recall_vocab(cfg)
    keys = torch.rand(batch, cfg.keys, generator=generator).argsort(-1)[:, :n]
    values = torch.randint(0, cfg.values, (batch, n), generator=generator)
    order = torch.rand(batch, n, generator=generator).argsort(-1)
    entries = tok["entry"] + keys * cfg.values + values
    filler = tok["filler"] + torch.randint(0, cfg.fillers, (batch, gap), generator=generator)
    questions = torch.stack([tok["key"] + keys.gather(1, order), tok["value"] + values.gather(1, order)], -1)
    if start == "random":
        at = torch.randint(0, gap + 1, (batch, 1), generator=generator)
    else:
        at = torch.full((batch, 1), v.int_at_least("start", start, 0))
        if start > gap:
            raise ValueError(f"start must be <= length - 3 * entries = {gap} (room for the dictionary), got {start}")
    j = torch.arange(gap + n)  # the body: filler with the dictionary inserted at `at`
    in_dict = (j >= at) & (j < at + n)
    body = torch.where(in_dict, entries.gather(1, (j - at).clamp(0, n - 1)),
                       filler.gather(1, torch.where(j < at, j, j - n).clamp(0, max(gap - 1, 0))) if gap else entries)
    tokens = torch.cat([body, questions.view(batch, 2 * n)], 1)
    asked = torch.zeros(batch, length, dtype=torch.bool)
    asked[:, length - 2 * n + 1::2] = True
    return tokens, asked


def sample(task: str, batch: int, length: int, cfg: ExperimentConfig, table: Tensor,
           generator: torch.Generator, start: int | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """(tokens, scored, ruled), each (batch, length): which tokens are predicted and scored, and the
    subset that a perfect model gets right (grammar: those that followed the table; recall: all).
    start (recall tasks): where the dictionary begins; None: the task's own (0, or random)."""
    if task == "grammar":
        tokens, ruled = grammar_sequences(batch, length, table, cfg.noise, generator)
        scored = torch.ones_like(ruled)
        scored[:, :2] = False
        return tokens, scored, ruled
    if start is None:
        start = "random" if task == "recall_anywhere" else 0
    tokens, asked = recall_sequences(batch, length, cfg, generator, start=start)
    return tokens, asked, asked


def best_accuracy(task: str, cfg: ExperimentConfig) -> float:
    """The best possible accuracy: the grammar's noise cannot be predicted; recall can be perfect."""
    return (1 - cfg.noise) + cfg.noise / cfg.vocab_size if task == "grammar" else 1.0


def chance_accuracy(task: str, cfg: ExperimentConfig) -> float:
    """Guessing: a uniform token of the grammar, a uniform value of recall."""
    return 1 / (cfg.vocab_size if task == "grammar" else cfg.values)


# ---------------------------------------------------------------- training

def build_model(method: str, cfg: ExperimentConfig, task: str = "grammar") -> TinyDecoder:
    vocab = cfg.vocab_size if task == "grammar" else recall_vocab(cfg)["size"]
    return TinyDecoder(DecoderConfig(vocab_size=vocab, positional=method, d_model=cfg.d_model,
                                     num_heads=cfg.num_heads, num_layers=cfg.num_layers, d_ff=cfg.d_ff,
                                     max_len=cfg.train_len))


def _table(cfg: ExperimentConfig, seed: int) -> Tensor:
    return grammar_table(cfg.vocab_size, torch.Generator().manual_seed(seed))


def train(method: str, cfg: ExperimentConfig, task: str = "grammar", seed: int = 0,
          device: torch.device | str = "cpu") -> tuple[TinyDecoder, list[float]]:
    """Train one method on one task for one seed; every method sees the same batches.
    The model is initialised on the CPU and moved to ``device`` (the same weights anywhere).
    returns (model, loss every 50 steps)."""
    torch.manual_seed(seed)
    model = build_model(method, cfg, task).to(device)
    table, data = _table(cfg, seed), torch.Generator().manual_seed(seed + 1)
    curve = _training.train(model, lambda: sample(task, cfg.batch_size, cfg.train_len, cfg, table, data)[:2],
                            steps=cfg.steps, lr=cfg.lr, warmup=cfg.warmup, log_every=50)
    return model, curve


# ---------------------------------------------------------------- evaluation

def _summary(correct: Tensor, loss: Tensor, ruled: Tensor, tail: Tensor | None = None) -> dict[str, float]:
    """acc and loss over every scored token; rule_acc over those a perfect model gets right;
    tail_acc over those in `tail` (the last window_stride positions: where a sliding window scores)."""
    out = {
        "acc": round(correct.float().mean().item(), 4),
        "n": correct.numel(),
        "loss": round(loss.mean().item(), 4),
        "rule_acc": round(correct[ruled].float().mean().item(), 4),
    }
    if tail is not None:
        out["tail_acc"] = round(correct[tail].float().mean().item(), 4)
    return out


@torch.no_grad()
def _forward(model: TinyDecoder, tokens: Tensor, rope: tuple[Tensor, float] | None, chunk: int = 32) -> Tensor:
    """The model's logits, in chunks of sequences; rope = (inv_freq, attention_factor): RoPE swapped for
    one with these frequencies (context extension at evaluation), else the model as trained."""
    if rope is not None:
        scaled = model.positional.rope.reconfigured(inv_freq=rope[0], attention_factor=rope[1])
        with swapped_rotary(model, scaled):
            return _forward(model, tokens, None, chunk)
    return _training.logits_on_cpu(model, tokens, chunk)


def evaluate_full(model: TinyDecoder, tokens: Tensor, scored: Tensor, ruled: Tensor,
                  rope: tuple[Tensor, float] | None = None, tail: int = 16) -> dict[str, float]:
    """The model reads each whole sequence at once (non-overlapping); tail_acc: its last `tail` positions."""
    correct, loss = _training.masked_scores(_forward(model, tokens, rope), tokens, scored)
    late = torch.zeros_like(scored)
    late[:, -tail:] = True
    return _summary(correct, loss, ruled[scored], late[scored])


def evaluate_sliding(model: TinyDecoder, tokens: Tensor, scored: Tensor, ruled: Tensor, window: int,
                     stride: int) -> dict[str, float]:
    """Each sequence read through windows of `window` tokens moved by `stride`.

    The first window scores its marked tokens, later ones only the marked tokens among their
    last `stride`, so every marked token is scored once, with at least window - stride tokens
    of context and never a position beyond the training length.
    """
    n, L = tokens.shape
    w = (L - window) // stride + 1
    flat = tokens.unfold(1, window, stride).reshape(n * w, window)
    own = torch.zeros(w, window, dtype=torch.bool)  # the tokens each window is responsible for
    own[0] = True
    own[1:, -stride:] = True
    own = own.repeat(n, 1)
    keep = scored.unfold(1, window, stride).reshape(n * w, window) & own
    correct, loss = _training.masked_scores(_forward(model, flat, None), flat, keep)
    return _summary(correct, loss, ruled.unfold(1, window, stride).reshape(n * w, window)[keep])


def evaluation_sets(task: str, cfg: ExperimentConfig, seed: int) -> dict[str, dict[int, tuple[Tensor, Tensor, Tensor]]]:
    """The test sequences per length, the same for every method: {"main": {L: data}} and, for the
    recall tasks, {"trained_distances": {L: data}} with the dictionary at L - train_len."""
    table, gen = _table(cfg, seed), torch.Generator().manual_seed(seed + 2)
    lengths = [cfg.train_len * m for m in cfg.eval_multiples]
    sets = {"main": {L: sample(task, cfg.eval_sequences, L, cfg, table, gen) for L in lengths}}
    if task in RECALL_TASKS:
        control = torch.Generator().manual_seed(seed + 3)
        sets["trained_distances"] = {L: sample(task, cfg.eval_sequences, L, cfg, table, control,
                                               start=L - cfg.train_len) for L in lengths}
    return sets


def attention_profile(model: TinyDecoder, task: str, tokens: Tensor, scored: Tensor, cfg: ExperimentConfig,
                      rope: tuple[Tensor, float] | None = None) -> list[list[dict[str, float | None]]]:
    """Where each layer's and head's attention goes when the model makes its scored predictions.

    The queries: the position before each scored answer (recall: the asked key), or for the
    grammar the last window_stride positions. Per layer, per head, means over the queries:
    mass     weight on the keys the answer needs (recall: the entry holding the asked key;
             grammar: the query token and the one before it, all the rule reads)
    far      total weight on keys train_len or more tokens back (distances never seen in training)
    far_gap  mean logit of those far keys minus mean logit of the other keys within the trained
             distances (None when no key is that far): a preference for far keys, beyond their number
    logit, rest (recall): the entry's logit and the log-sum-exp of all other visible keys' logits
    returns [layer][head] -> dict.
    """
    if rope is not None:
        scaled = model.positional.rope.reconfigured(inv_freq=rope[0], attention_factor=rope[1])
        with swapped_rotary(model, scaled):
            return attention_profile(model, task, tokens, scored, cfg)
    B, L = tokens.shape
    recall = task in RECALL_TASKS
    if recall:  # the asked key, one position before each scored value
        qb, qpos = scored.nonzero(as_tuple=True)
        qpos = qpos - 1
    else:
        qpos = torch.arange(L - cfg.window_stride, L).repeat(B)
        qb = torch.arange(B).repeat_interleave(cfg.window_stride)
    keys = torch.arange(L)
    dist = qpos[:, None] - keys[None, :]  # (Q, L); negative: future keys
    visible, far = dist >= 0, dist >= cfg.train_len
    if recall:
        tok = recall_vocab(cfg)
        asked_key = tokens[qb, qpos] - tok["key"]
        row = tokens[qb]  # (Q, L)
        is_entry = (row >= tok["entry"]) & (row < tok["key"])
        need = is_entry & ((row - tok["entry"]) // cfg.values == asked_key[:, None]) & visible
    else:
        need = visible & (dist <= 1)
    near = visible & ~far & ~need  # the other keys within the trained distances
    out = []
    for logits in model.attention_logits(tokens.to(_training.device_of(model))):
        lg = logits.cpu()[qb, :, qpos].transpose(0, 1)  # (H, Q, L), measured on the CPU
        w = lg.softmax(-1)
        heads = []
        for h in range(lg.shape[0]):
            entry: dict[str, float | None] = {
                "mass": round((w[h] * need).sum(-1).mean().item(), 4),
                "far": round((w[h] * far).sum(-1).mean().item(), 4),
                "far_gap": None,
            }
            if far.any():
                mean_far = lg[h].masked_fill(~far, 0).sum(-1) / far.sum(-1).clamp(min=1)
                mean_near = (lg[h].masked_fill(~near, 0)).sum(-1) / near.sum(-1).clamp(min=1)
                has = far.any(-1)
                entry["far_gap"] = round((mean_far - mean_near)[has].mean().item(), 4)
            if recall:
                entry["logit"] = round(lg[h][need].mean().item(), 4)
                entry["rest"] = round(lg[h].masked_fill(need | ~visible, float("-inf")).logsumexp(-1).mean().item(), 4)
            heads.append(entry)
        out.append(heads)
    return out


def evaluate(model: TinyDecoder, method: str, sets: dict, cfg: ExperimentConfig, task: str = "grammar",
             rope: tuple | None = None, windows: bool = True) -> dict[str, dict]:
    """Every evaluation at every length; None where a method cannot run (learned beyond its table).

    rope: a function L -> (inv_freq, attention_factor), RoPE's frequencies swapped at length L
    (context extension); then the sliding window is left out (it never leaves the training length),
    as it is with ``windows=False`` (a change that cannot act inside the training length)."""
    windows = windows and not rope
    out: dict[str, dict] = {"nonoverlapping": {}, "sliding_window": {}} if windows else {"nonoverlapping": {}}
    if "trained_distances" in sets:
        out["trained_distances"] = {}
    out["attention"] = {mode: {} for mode in ("nonoverlapping", "trained_distances") if mode in out}
    spec = POSITIONAL_METHODS[method]
    n = cfg.attention_sequences
    for L, data in sets["main"].items():
        fits = L <= cfg.train_len or not spec.length_limited
        freq = rope(L) if rope else None
        res = evaluate_full(model, *data, rope=freq, tail=cfg.window_stride) if fits else None
        if res is not None and freq is not None and freq[1] != 1.0:  # the frequencies alone, without the factor
            res["acc_factor_1"] = evaluate_full(model, *data, rope=(freq[0], 1.0))["acc"]
        out["nonoverlapping"][str(L)] = res
        if windows:
            out["sliding_window"][str(L)] = evaluate_sliding(model, *data, cfg.train_len, cfg.window_stride)
        out["attention"]["nonoverlapping"][str(L)] = (attention_profile(model, task, data[0][:n], data[1][:n], cfg, freq)
                                                      if fits else None)
        if "trained_distances" in sets:
            control = sets["trained_distances"][L]
            out["trained_distances"][str(L)] = evaluate_full(model, *control, rope=freq) if fits else None
            out["attention"]["trained_distances"][str(L)] = (
                attention_profile(model, task, control[0][:n], control[1][:n], cfg, freq) if fits else None)
    return out


def evaluate_rope_scalings(model: TinyDecoder, sets: dict, cfg: ExperimentConfig, task: str = "grammar") -> dict[str, dict]:
    """The trained RoPE model with each scaling at factor L / train_len (the whole sequence at once).

    A scaling that also multiplies the logits (YaRN's attention factor) is scored a second
    time with the factor set to 1 ("acc_factor_1"): the frequencies alone.
    """
    head_dim = cfg.d_model // cfg.num_heads

    def frequencies(name: str):
        return lambda L: scaled_rope_frequencies(head_dim, method=name, factor=L / cfg.train_len,
                                                 original_max_position=cfg.train_len, seq_len=L,
                                                 base=model.config.base)

    return {f"rope+{name}": evaluate(model, "rope", sets, cfg, task, rope=frequencies(name)) for name in cfg.scalings}


# ---------------------------------------------------------------- the run

def run_seed(cfg: ExperimentConfig, task: str, seed: int, device: str = "cpu") -> dict:
    """Train and evaluate every method on one task for one seed (one process's unit of work)."""
    torch.set_num_threads(cfg.threads)
    cpu_start = time.process_time()
    sets = evaluation_sets(task, cfg, seed)
    out: dict = {"seed": seed, "methods": {}, "train_seconds": {}}
    for method in cfg.methods:
        t0 = time.perf_counter()
        model, curve = train(method, cfg, task, seed, device)
        out["train_seconds"][method] = round(time.perf_counter() - t0, 1)
        out["methods"][method] = {"train_loss_curve": curve, **evaluate(model, method, sets, cfg, task)}
        if method == "rope":
            out["methods"].update(evaluate_rope_scalings(model, sets, cfg, task))
        if method == "irope":  # Llama 4's chunked RoPE layers: the same trained model (train_len = one chunk)
            model.positional.chunk = cfg.train_len
            out["methods"]["irope+chunk"] = evaluate(model, method, sets, cfg, task)
            model.positional.chunk = None
            # the temperature off: it is 1 inside every sliding window's scored positions, so no windows
            model.positional.temperature = False
            out["methods"]["irope+notemp"] = evaluate(model, method, sets, cfg, task, windows=False)
            model.positional.temperature = True
    out["cpu_time_s"] = round(time.process_time() - cpu_start, 1)
    return out


def summarize(per_seed: list[dict]) -> dict[str, dict]:
    """Per method, mode and length: the accuracies of every seed and their mean, min and max."""
    out: dict = {}
    for method, modes in per_seed[0]["methods"].items():
        out[method] = {}
        for mode, by_len in modes.items():
            if mode in ("train_loss_curve", "attention"):  # attention: per seed only (attention_heads)
                continue
            out[method][mode] = {}
            for L, r in by_len.items():
                if r is None:
                    out[method][mode][L] = None
                    continue
                accs = [s["methods"][method][mode][L]["acc"] for s in per_seed]
                n = min(s["methods"][method][mode][L]["n"] for s in per_seed)
                out[method][mode][L] = {"acc": accs, **_training.spread(accs), "n": n}
    return out


def run(cfg: ExperimentConfig, *, jobs: int = 1, log=print, device: torch.device | str = "cpu") -> dict:
    """Every task, seed and method; `jobs` processes share the (task, seed) units; the models train on
    ``device`` (the data are drawn on the CPU either way). Returns the results dict."""
    device = str(device)
    t_start = time.perf_counter()
    units = [(task, seed) for task in cfg.tasks for seed in cfg.seeds]
    if jobs > 1:
        with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool:
            done = list(pool.map(run_seed, [cfg] * len(units), *zip(*units), [device] * len(units)))
    else:
        done = [run_seed(cfg, task, seed, device) for task, seed in units]
    results: dict = {"config": asdict(cfg), "environment": _cli.environment(device), "tasks": {}}
    for task in cfg.tasks:
        per_seed = [r for (t, _), r in zip(units, done) if t == task]
        results["tasks"][task] = {
            "description": TASK_DESCRIPTIONS[task],
            "best_acc": round(best_accuracy(task, cfg), 4),
            "chance_acc": round(chance_accuracy(task, cfg), 4),
            "methods": summarize(per_seed),
            "seeds": per_seed,
        }
        for method, entry in results["tasks"][task]["methods"].items():
            row = entry["nonoverlapping"]
            log(f"{task:>8} {method:>12}: mean accuracy "
                + "  ".join(f"{L}: " + ("  n/a" if r is None else f"{r['mean']:.3f}") for L, r in row.items()))
    results["wall_time_s"] = round(time.perf_counter() - t_start, 1)
    # CPU seconds of the work, summed over processes: the wall time of a one-process run on an
    # idle machine, and unaffected by other programs sharing the cores.
    results["cpu_time_s"] = round(sum(r["cpu_time_s"] for r in done), 1)
    return results


TASK_DESCRIPTIONS = {
    "grammar": "order-2 random grammar: x_t = T[x_{t-2}, x_{t-1}], random with probability noise; "
               "every token from the third on is scored",
    "recall": "key-value recall across a gap: a dictionary of (key, value) tokens, filler, then each key "
              "asked once; the values after the asked keys are scored",
    "recall_anywhere": "recall with the dictionary at a uniformly random place before the questions, in "
                       "training and evaluation",
}


def accuracy(results: dict, task: str, method: str, mode: str = "nonoverlapping") -> dict[int, dict | None]:
    """{L: {"acc": [per seed], "mean", "min", "max"} or None} for one curve of a results dict."""
    return {int(L): r for L, r in results["tasks"][task]["methods"][method][mode].items()}


def compare(results: dict, task: str, a: str, b: str, L: int, mode: str = "nonoverlapping") -> int:
    """+1 if every seed of `a` beats every seed of `b` at length L (the ranges do not overlap),
    -1 if the reverse, 0 if the ranges overlap: the seeds cannot tell the two apart."""
    ra, rb = accuracy(results, task, a, mode)[L], accuracy(results, task, b, mode)[L]
    if ra["min"] > rb["max"]:
        return 1
    if rb["min"] > ra["max"]:
        return -1
    return 0


def separation(results: dict, task: str, a: str, b: str, L: int, mode: str = "nonoverlapping") -> float:
    """The gap between the worst seed of `a` and the best seed of `b` at length L, in units of
    the evaluation noise of that gap (``_training.separation``): below 0 the seed ranges overlap,
    0 to 2 a thin win (fewer answers than two standard errors), above 2 a clear one."""
    ra, rb = accuracy(results, task, a, mode)[L], accuracy(results, task, b, mode)[L]
    return _training.separation(ra["min"], rb["max"], min(ra["n"], rb["n"]))


def attention_heads(results: dict, task: str, method: str, L: int, key: str = "mass",
                    mode: str = "nonoverlapping") -> list[list[list[float | None]]]:
    """[seed][layer][head] of one attention measurement (``key``, see ``attention_profile``) at length L,
    on the main test sequences ("nonoverlapping") or the recall control ("trained_distances")."""
    return [[[h[key] for h in layer] for layer in s["methods"][method]["attention"][mode][str(L)]]
            for s in results["tasks"][task]["seeds"]]


def load_results(name: str = "extrapolation") -> dict:
    """A committed results file, results/<name>.json, wherever the caller runs (notebooks/, the root)."""
    return _cli.load_results(name)


# ---------------------------------------------------------------- two more controls on the recall models

CONTROLS = Path("results") / "recall_controls.json"
PLACEMENTS = 7  # dictionary starts per length, from 0 (dictionary first) to L - train_len (trained distances)


@contextmanager
def banded(model: TinyDecoder, width: int, *, layers: Iterable[int] | None = None,
           heads: Iterable[int] | None = None) -> Iterator[TinyDecoder]:
    """Inside the ``with`` block, every key ``width`` or more tokens back is hidden (-inf), on top of the model's own
    bias, in the chosen ``layers`` and ``heads`` (0-based; None: all of them): a positional mask that leaves those
    heads only the distances 0 .. width - 1. For score-bias methods (ALiBi, T5): the mask is added to the bias each
    chosen layer receives (a forward pre-hook on its attention), so one head of one layer can be banded alone."""
    if model.positional.bias(1, 1) is None:
        raise ValueError(f"model must add a score bias (e.g. positional='alibi') to be banded, "
                         f"got positional={model.config.positional!r}")
    width = v.int_at_least("width", width, 1)
    num_layers, num_heads = len(model.blocks), model.config.num_heads
    layers = list(range(num_layers) if layers is None else layers)
    heads = list(range(num_heads) if heads is None else heads)
    for name, chosen, count in (("layers", layers, num_layers), ("heads", heads, num_heads)):
        if not chosen or any(not isinstance(i, int) or not 0 <= i < count for i in chosen):
            raise ValueError(f"{name} must be indices in 0 .. {count - 1} (or None for all), got {chosen!r}")
    in_band = torch.zeros(num_heads, 1, 1, dtype=torch.bool)
    in_band[heads] = True

    def add_band(module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        b = kwargs["bias"]  # (H, T, S): the last T of S positions are the queries
        T, S = b.shape[-2:]
        back = torch.arange(S - T, S)[:, None] - torch.arange(S)[None, :]  # i - j
        return args, {**kwargs, "bias": b.masked_fill(((back >= width) & in_band).to(b.device), float("-inf"))}

    handles = [model.blocks[i].attn.register_forward_pre_hook(add_band, with_kwargs=True) for i in layers]
    try:
        yield model
    finally:
        for handle in handles:
            handle.remove()


@torch.no_grad()
def pair_logits(model: TinyDecoder, tokens: Tensor, scored: Tensor, cfg: ExperimentConfig, *,
                contrast: bool = False) -> list[list[list[float]]]:
    """A rotary recall model: how much each RoPE pair adds to the asked entry's logit.

    The queries are the asked keys (as in ``attention_profile``); the entry's logit q.k / sqrt(d) is a sum over
    the pairs j (features 2j, 2j + 1, interleaved) of (q_2j k_2j + q_2j+1 k_2j+1) / sqrt(d), after the rotation.
    contrast: False: pair j's term of the entry's logit (the terms of a head add up to its logit). True: that term
    minus the mean of the same pair's term over every other key the query sees, so a pair that scores every key
    alike counts 0: what the pair does to tell the entry apart.
    returns [layer][head][pair]: the mean over the queries.
    """
    qb, qpos = scored.nonzero(as_tuple=True)
    qpos = qpos - 1
    tok = recall_vocab(cfg)
    row = tokens[qb]
    asked = tokens[qb, qpos] - tok["key"]
    is_entry = (row >= tok["entry"]) & (row < tok["key"]) & ((row - tok["entry"]) // cfg.values == asked[:, None])
    entry = is_entry.float().argmax(-1)  # one entry holds the asked key
    others = (torch.arange(tokens.shape[1])[None, :] <= qpos[:, None]) & ~is_entry  # (Q, L): the other visible keys
    out = []
    for q, k in model.rotated_qk(tokens):
        H, d = q.shape[1], q.shape[-1]
        per_key = (q[qb, :, qpos][:, :, None, :] * k[qb]).view(len(qb), H, -1, d // 2, 2).sum(-1) / d**0.5
        terms = per_key[torch.arange(len(qb)), :, entry]  # (Q, H, pairs): the entry's
        if contrast:
            weights = (others / others.sum(-1, keepdim=True))[:, None, :, None]  # (Q, 1, L, 1)
            terms = terms - (per_key * weights).sum(2)
        out.append([[round(x, 4) for x in head] for head in terms.mean(0).tolist()])  # (H, pairs)
    return out


def placement_starts(L: int, cfg: ExperimentConfig, count: int = PLACEMENTS) -> list[int]:
    """``count`` dictionary starts evenly from 0 to L - train_len: lookups L - 11 - start .. L - 2 - start back."""
    return [round(k * (L - cfg.train_len) / (count - 1)) for k in range(count)]


def run_controls_seed(cfg: ExperimentConfig, seed: int) -> dict:
    """One seed of both controls on the dictionary-first recall task (the models of ``run_seed``, retrained).

    alibi_band: ALiBi with the dictionary at the trained distances (the experiment's own control sets), read
        whole ("plain") and with every key train_len or more back masked (``banded``): in every layer and head
        ("banded"), in one layer only ("banded_layer1", "banded_layer2", ...), and in the
        lookup head only ("banded_lookup": the head with the most mass on the asked entry at the training length,
        dictionary first, ``lookup_head`` = [layer, head]): accuracy and attention.
    rope_pairs: each RoPE pair's term of the asked entry's logit at the training length (``pair_logits``);
    rope_pair_contrast: the same term minus its mean over the other keys the query sees (``contrast=True``).
    placement: RoPE, plain and with each scaling at factor L / train_len, with the dictionary at
        ``placement_starts(L)``: {scaling: {L: {start: accuracy}}}.
    """
    torch.set_num_threads(cfg.threads)
    cpu_start = time.process_time()
    sets, n = evaluation_sets("recall", cfg, seed), cfg.attention_sequences
    alibi, _ = train("alibi", cfg, "recall", seed)
    main64 = sets["main"][cfg.train_len]
    profile64 = attention_profile(alibi, "recall", main64[0][:n], main64[1][:n], cfg)
    mass64 = [[h["mass"] for h in layer] for layer in profile64]
    lookup = max(((layer, head) for layer in range(cfg.num_layers) for head in range(cfg.num_heads)),
                 key=lambda lh: mass64[lh[0]][lh[1]])
    bands = {"plain": None, "banded": {}, **{f"banded_layer{i + 1}": {"layers": [i]} for i in range(cfg.num_layers)},
             "banded_lookup": {"layers": [lookup[0]], "heads": [lookup[1]]}}
    band: dict = {mode: {} for mode in bands} | {"lookup_head": list(lookup), "attention": {mode: {} for mode in bands}}
    for L, data in sets["trained_distances"].items():
        for mode, where in bands.items():
            with nullcontext() if where is None else banded(alibi, cfg.train_len, **where):
                band[mode][str(L)] = evaluate_full(alibi, *data)
                heads = attention_profile(alibi, "recall", data[0][:n], data[1][:n], cfg)
            band["attention"][mode][str(L)] = [[{key: h[key] for key in ("mass", "logit", "rest")} for h in layer]
                                               for layer in heads]
    rope, _ = train("rope", cfg, "recall", seed)
    pairs = pair_logits(rope, main64[0][:n], main64[1][:n], cfg)
    contrast = pair_logits(rope, main64[0][:n], main64[1][:n], cfg, contrast=True)
    head_dim = cfg.d_model // cfg.num_heads
    table, gen = _table(cfg, seed), torch.Generator().manual_seed(seed + 4)
    placement: dict = {s: {} for s in ("none", *cfg.scalings)}
    for L in [cfg.train_len * m for m in cfg.eval_multiples[1:]]:
        data = {start: sample("recall", cfg.eval_sequences, L, cfg, table, gen, start=start)
                for start in placement_starts(L, cfg)}
        for s in placement:
            freq = None if s == "none" else scaled_rope_frequencies(
                head_dim, method=s, factor=L / cfg.train_len, original_max_position=cfg.train_len, seq_len=L,
                base=rope.config.base)
            placement[s][str(L)] = {str(start): evaluate_full(rope, *d, rope=freq)["acc"] for start, d in data.items()}
    return {"seed": seed, "alibi_band": band, "rope_pairs": pairs, "rope_pair_contrast": contrast,
            "placement": placement,
            "cpu_time_s": round(time.process_time() - cpu_start, 1)}


def run_controls(cfg: ExperimentConfig, *, jobs: int = 1) -> dict:
    """Both controls for every seed (``run_controls_seed``); the results dict of results/recall_controls.json."""
    t_start = time.perf_counter()
    if jobs > 1:
        with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool:
            done = list(pool.map(run_controls_seed, [cfg] * len(cfg.seeds), cfg.seeds))
    else:
        done = [run_controls_seed(cfg, seed) for seed in cfg.seeds]
    return {"config": asdict(cfg), "environment": _cli.environment(), "seeds": done,
            "wall_time_s": round(time.perf_counter() - t_start, 1),
            "cpu_time_s": round(sum(r["cpu_time_s"] for r in done), 1)}


KERNELS = Path("results") / "other_kernels.json"


def run_kernel_check(cfg: ExperimentConfig) -> dict:
    """A few of the committed models retrained under whatever kernels this process uses, read at once at every length.

    Run it with another CPU's kernels forced (on an AVX-512 CPU: ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2), a
    stand-in for a rerun on another CPU: ALiBi on recall for every seed, RoPE and ALiBi on the grammar for the first
    seed. The results name the kernels (environment) and the forcing variables (forced); compare with the
    committed experiment's accuracies of the same models.
    """
    import os

    torch.set_num_threads(cfg.threads)
    cpu_start = time.process_time()
    out: dict = {"config": asdict(cfg), "environment": _cli.environment(),
                 "forced": {k: os.environ.get(k) for k in ("ATEN_CPU_CAPABILITY", "MKL_CBWR")},
                 "recall": {"alibi": {}}, "grammar": {}}
    for seed in cfg.seeds:
        sets = evaluation_sets("recall", cfg, seed)
        model, _ = train("alibi", cfg, "recall", seed)
        out["recall"]["alibi"][str(seed)] = {str(L): evaluate_full(model, *data)["acc"]
                                             for L, data in sets["main"].items()}
    for method in ("rope", "alibi"):
        seed = cfg.seeds[0]
        sets = evaluation_sets("grammar", cfg, seed)
        model, _ = train(method, cfg, "grammar", seed)
        out["grammar"][method] = {str(seed): {str(L): evaluate_full(model, *data)["acc"]
                                              for L, data in sets["main"].items()}}
    out["cpu_time_s"] = round(time.process_time() - cpu_start, 1)
    return out


# ---------------------------------------------------------------- the figure

# One colour and label per curve, the same in every panel. Trained methods take theirs from
# the model's registry; "rope+<scaling>" (RoPE evaluated with a scaling of posenc_lib.scaling)
# from the scaling's name.
SCALING_STYLES = {"linear": ("PI", "#ff7f0e"), "ntk": ("NTK", "#e377c2"), "yarn": ("YaRN", "#17becf"),
                  "llama3": ("Llama 3", "#bcbd22"), "dynamic": ("dynamic NTK", "#aec7e8")}
COLORS = {**{m: spec.color for m, spec in POSITIONAL_METHODS.items()},
          **{f"rope+{s}": color for s, (_, color) in SCALING_STYLES.items()}, "irope+chunk": "#c5b0d5",
          "irope+notemp": "#c49c94"}
LABELS = {**{m: spec.label for m, spec in POSITIONAL_METHODS.items()},
          **{f"rope+{s}": f"{POSITIONAL_METHODS['rope'].label} + {label}" for s, (label, _) in SCALING_STYLES.items()},
          "irope+chunk": f"{POSITIONAL_METHODS['irope'].label}, chunked",
          "irope+notemp": f"{POSITIONAL_METHODS['irope'].label}, no temperature"}


def draw(results: dict, fig=None):
    """One row per task, three panels each; points are the mean over seeds, bars the min to max."""
    from matplotlib.figure import Figure

    cfg = results["config"]
    tasks = list(results["tasks"])
    if fig is None:
        fig = Figure(figsize=(13, 3.9 * len(tasks)), dpi=100, facecolor="white", layout="constrained")
    grid = fig.subplots(len(tasks), 3, sharey="row", squeeze=False)
    lengths = [cfg["train_len"] * m for m in cfg["eval_multiples"]]
    for row, task in zip(grid, tasks):
        entry = results["tasks"][task]
        base = [m for m in entry["methods"] if "+" not in m]
        scaled = ["rope"] + [m for m in entry["methods"] if m.startswith("rope+")] if "rope" in base else []
        panels = [
            (row[0], base, "nonoverlapping", "the model reads L tokens"),
            (row[1], scaled, "nonoverlapping", "RoPE stretched at evaluation (no retraining)"),
            (row[2], base, "sliding_window", f"sliding window of {cfg['train_len']} (stride {cfg['window_stride']})"),
        ]
        for ax, methods, mode, title in panels:
            for k, m in enumerate(methods):
                pts = [(L, r) for L, r in accuracy(results, task, m, mode).items() if r is not None]
                if not pts:
                    continue
                xs = [L * 1.03 ** (k - len(methods) / 2) for L, _ in pts]  # nudge apart so bars stay visible
                mean = [r["mean"] for _, r in pts]
                err = [[r["mean"] - r["min"] for _, r in pts], [r["max"] - r["mean"] for _, r in pts]]
                ax.errorbar(xs, mean, yerr=err, marker="o", ms=4, capsize=3, color=COLORS.get(m),
                            label=LABELS.get(m, m))
            ax.axvline(cfg["train_len"], color="black", lw=0.8, ls=":")
            ax.axhline(entry["best_acc"], color="black", lw=0.8, ls="--")
            ax.axhline(entry["chance_acc"], color="grey", lw=0.8, ls="-.")
            ax.set_xscale("log", base=2)
            ax.set_xticks(lengths, [str(L) for L in lengths])
            ax.minorticks_off()
            ax.set_xlabel("evaluation length L (tokens)")
            ax.set_title(f"{task}: {title}", fontsize=10)
            ax.set_ylim(-0.02, 1.02)
            ax.grid(alpha=0.3)
            ax.set_facecolor("white")
            if methods:
                ax.legend(fontsize=7, loc="lower left")
        row[0].set_ylabel(f"{task}: accuracy")
        row[0].annotate("best possible", (lengths[-1], entry["best_acc"]), fontsize=8, ha="right", va="bottom")
        row[0].annotate("guessing", (lengths[-1], entry["chance_acc"]), fontsize=8, ha="right", va="bottom")
    fig.suptitle(f"Trained at {cfg['train_len']} tokens, tested longer: mean over {len(cfg['seeds'])} seeds "
                 "(bars: min to max)\nRows: a local grammar; recall across a gap, the dictionary first; "
                 "the same, the dictionary anywhere", fontsize=11)
    return fig


def plot(results_path: str | Path = RESULTS, out_png: str | Path = FIGURE) -> Path:
    """Redraw the figure from a results file without retraining (``make images``)."""
    return _cli.plot_file(draw, results_path, out_png)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
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


if __name__ == "__main__":
    sys.exit(main())
