"""The experiment's configuration and its three tasks: grammar (local), recall and recall_anywhere (long range)."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from itertools import product
from pathlib import Path

import torch
from torch import Tensor

from ... import _validate as v

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


def key_blind_floor(values: int, entries: int, reader: str = "best") -> Fraction:
    """Recall's key-blind floor, exactly: the mean accuracy over the `entries` questions of a reader that never reads
    the asked key, when the entries not yet asked hold i.i.d. uniform values of `values` (each key is asked once and
    earlier answers are in the input, so the reader can skip them). reader: "best", the commonest unanswered value
    (no key-blind reader does better: each unanswered entry is equally likely to be the one asked); "skip", a random
    unanswered entry; "copy", a random entry, answered ones included."""
    if reader == "copy":
        return Fraction(1, entries) + Fraction(entries - 1, entries) / values
    pick = {"best": lambda c, r: Fraction(max(c), r), "skip": lambda c, r: sum(Fraction(k, r) ** 2 for k in c)}[reader]
    per_question = []
    for r in range(1, entries + 1):  # r entries not yet asked
        counts = [Counter(vals).values() for vals in product(range(values), repeat=r)]
        per_question.append(sum(pick(c, r) for c in counts) / Fraction(values**r))
    return sum(per_question) / entries


TASK_DESCRIPTIONS = {
    "grammar": "order-2 random grammar: x_t = T[x_{t-2}, x_{t-1}], random with probability noise; "
               "every token from the third on is scored",
    "recall": "key-value recall across a gap: a dictionary of (key, value) tokens, filler, then each key "
              "asked once; the values after the asked keys are scored",
    "recall_anywhere": "recall with the dictionary at a uniformly random place before the questions, in "
                       "training and evaluation",
}
