"""Two more controls on the recall models (the dictionary moved, far keys masked), and a retraining
under other CPU kernels."""
from __future__ import annotations

import time
from contextlib import contextmanager, nullcontext
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from multiprocessing import get_context
from pathlib import Path
from typing import Iterable, Iterator

import torch
from torch import Tensor, nn

from ... import _validate as v
from ...model import TinyDecoder
from ...scaling import scaled_rope_frequencies
from .. import _cli
from .config import ExperimentConfig, recall_vocab, sample
from .training import seed_grammar_table, train
from .evaluation import attention_profile, evaluate_full, evaluation_sets


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
    table, gen = seed_grammar_table(cfg, seed), torch.Generator().manual_seed(seed + 4)
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
