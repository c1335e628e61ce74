"""Building and training one model of the experiment."""
from __future__ import annotations

import torch
from torch import Tensor

from ...model import DecoderConfig, TinyDecoder
from .. import _training
from .config import ExperimentConfig, grammar_table, recall_vocab, sample

lr_factor = _training.lr_factor  # the learning-rate schedule every model trains with (public name)


def build_model(method: str, cfg: ExperimentConfig, task: str = "grammar") -> TinyDecoder:
    vocab = cfg.vocab_size if task == "grammar" else recall_vocab(cfg)["size"]
    return TinyDecoder(DecoderConfig(vocab_size=vocab, positional=method, d_model=cfg.d_model,
                                     num_heads=cfg.num_heads, num_layers=cfg.num_layers, d_ff=cfg.d_ff,
                                     max_len=cfg.train_len))


def seed_grammar_table(cfg: ExperimentConfig, seed: int) -> Tensor:
    """The grammar task's table for one seed (training and evaluation draw the same one)."""
    return grammar_table(cfg.vocab_size, torch.Generator().manual_seed(seed))


def train(method: str, cfg: ExperimentConfig, task: str = "grammar", seed: int = 0,
          device: torch.device | str = "cpu") -> tuple[TinyDecoder, list[float]]:
    """Train one method on one task for one seed; every method sees the same batches.
    The model is initialised on the CPU and moved to ``device`` (the same weights anywhere).
    returns (model, loss every 50 steps)."""
    torch.manual_seed(seed)
    model = build_model(method, cfg, task).to(device)
    table, data = seed_grammar_table(cfg, seed), torch.Generator().manual_seed(seed + 1)
    curve = _training.train(model, lambda: sample(task, cfg.batch_size, cfg.train_len, cfg, table, data)[:2],
                            steps=cfg.steps, lr=cfg.lr, warmup=cfg.warmup, log_every=50)
    return model, curve
