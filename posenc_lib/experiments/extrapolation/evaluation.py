"""Scoring a trained model at every evaluation length (full and sliding-window), RoPE's scalings at
evaluation time, and the attention measurements."""
from __future__ import annotations

import torch
from torch import Tensor

from ...model import POSITIONAL_METHODS, TinyDecoder, swapped_rotary
from ...scaling import scaled_rope_frequencies
from .. import _training
from .config import ExperimentConfig, RECALL_TASKS, recall_vocab, sample
from .training import seed_grammar_table


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
    table, gen = seed_grammar_table(cfg, seed), torch.Generator().manual_seed(seed + 2)
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
