"""What the experiments share: the training loop, masked next-token scores and seed summaries.

Every experiment trains a ``TinyDecoder`` the same way (AdamW, linear warm-up then cosine
decay to a tenth of the rate, gradients clipped at 1), on next-token targets picked by a
boolean mask, and reports the mean and the range over seeds.

Two numbers say how much an ordering "every seed of A beats every seed of B" is worth: how
often it happens by chance when A and B do not differ (``ordering_by_chance``), and how far
apart the two seed ranges are in units of the evaluation noise (``separation``).
"""
from __future__ import annotations

import math
from math import comb
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def lr_factor(step: int, steps: int, warmup: int) -> float:
    """Learning-rate multiplier: linear warm-up over `warmup` steps, then cosine decay to 0.1."""
    if step < warmup:
        return (step + 1) / warmup
    t = (step - warmup) / max(1, steps - warmup)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t))


def masked_scores(logits: Tensor, tokens: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
    """(correct, loss), each flat (n_targets,), for the tokens marked in `target`.

    logits (B, L, V) from position t predict tokens[:, t + 1]; target (B, L) bool marks the
    tokens to predict (never position 0: nothing comes before it).
    """
    pred, goal = logits[:, :-1][target[:, 1:]], tokens[:, 1:][target[:, 1:]]
    return pred.argmax(-1) == goal, F.cross_entropy(pred, goal, reduction="none")


def device_of(model: nn.Module) -> torch.device:
    """Where a model's parameters live (the experiments move data there, and results back); the CPU for a
    stand-in without parameters."""
    first = next(model.parameters(), None) if hasattr(model, "parameters") else None
    return torch.device("cpu") if first is None else first.device


@torch.no_grad()
def logits_on_cpu(model: nn.Module, tokens: Tensor, chunk: int) -> Tensor:
    """model(tokens) in chunks of sequences, wherever the model lives; the logits come back to the CPU,
    where the scoring (masks built from the CPU's data) happens."""
    device = device_of(model)
    return torch.cat([model(tokens[i:i + chunk].to(device)).cpu() for i in range(0, tokens.shape[0], chunk)])


def train(model: nn.Module, batch: Callable[[], tuple[Tensor, Tensor]], *, steps: int, lr: float,
          warmup: int, log_every: int) -> list[float]:
    """Train `model` on `steps` batches of (tokens, target); returns the loss every `log_every` steps.
    The batches are drawn on the CPU (the same data on any device) and moved to the model's device."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, steps, warmup))
    curve = []
    model.train()
    for step in range(steps):
        tokens, target = (t.to(device_of(model)) for t in batch())
        loss = masked_scores(model(tokens), tokens, target)[1].mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % log_every == 0 or step == steps - 1:
            curve.append(round(loss.item(), 4))
    model.eval()
    return curve


def spread(xs: list[float]) -> dict[str, float]:
    """Mean, min and max over seeds (three seeds: the range is the honest error bar)."""
    return {"mean": round(sum(xs) / len(xs), 4), "min": min(xs), "max": max(xs)}


def ordering_by_chance(seeds_a: int, seeds_b: int) -> float:
    """P(every seed of A beats every seed of B) when the seeds' scores are exchangeable (A and B do
    not differ): 1 / C(a + b, a), 1/20 for three seeds each."""
    return 1 / comb(seeds_a + seeds_b, seeds_a)


def separation(worst_a: float, best_b: float, n: int) -> float:
    """(worst_a - best_b) in standard errors of the difference of two accuracies each measured on n
    answers, sqrt(2 p (1 - p) / n) at their midpoint p: below 0 the ranges overlap, 0 to 2 the
    gap is within evaluation noise (a thin win), above 2 it is not."""
    gap = worst_a - best_b
    p = (worst_a + best_b) / 2
    if gap == 0 or p * (1 - p) == 0:
        return 0.0
    return gap / math.sqrt(2 * p * (1 - p) / n)
