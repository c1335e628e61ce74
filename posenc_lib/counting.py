"""Recorders that count what a computation moves: the torch calls it makes (``RecordCalls``), the ATen operators
they run, forward and backward (``RecordOps``), and the entries and bytes of each tensor each reads and writes.

Appendix 10 (notebooks/10_making_it_fast.ipynb) counts with one rule, `bounds`, on `RecordOps`'s records. Bytes are the distinct values a
tensor shows times their size: an expanded view (stride 0) counts its values once, a strided view only the values
it shows, though the memory behind it may be larger.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

__all__ = ["Call", "RecordCalls", "RecordOps", "bounds", "entries_and_bytes", "record", "total_bytes"]


class Call(NamedTuple):
    """One recorded torch call: its name, and (entries, bytes) of each tensor it reads and of each it writes."""

    name: str
    read: list[tuple[int, int]]
    written: list[tuple[int, int]]

    @property
    def size(self) -> int:
        """Entries of the largest tensor the call touches."""
        return max((n for n, _ in (*self.read, *self.written)), default=0)


def entries_and_bytes(tensors) -> list[tuple[int, int]]:
    """(entries shown, bytes of the distinct values shown): an expanded view (stride 0) holds each value once;
    a strided view counts only the values it shows."""
    return [(t.numel(), math.prod(n for n, step in zip(t.shape, t.stride()) if step != 0) * t.element_size())
            for t in tensors]


class _Recorder:
    """What the two recorders share: the list of `Call`s they keep (``recorded``), and running each call they see."""

    def __init__(self):
        super().__init__()
        self.recorded: list[Call] = []

    @staticmethod
    def _run(func, args, kwargs):
        """(kwargs, result) of func called as asked: kwargs as a dict, never None."""
        kwargs = kwargs or {}
        return kwargs, func(*args, **kwargs)


class RecordCalls(_Recorder, TorchFunctionMode):
    """Inside a `with` block, records each torch call (a `Call`). A call reads its tensor arguments and writes
    its results, except: `out=` and the destination of `copy_` are written, not read; an in-place call
    (`addcmul_`) reads and writes its tensor; a call that hands back one of its arguments unchanged
    (`x.float()` of a float32 x) moves nothing."""

    calls = property(lambda self: self.recorded, doc="The recorded `Call`s, in order.")

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs, out = self._run(func, args, kwargs)
        name = getattr(func, "__name__", str(func))
        read = [t for t in tree_leaves((args, {k: v for k, v in kwargs.items() if k != "out"}))
                if isinstance(t, torch.Tensor)]
        written = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        if name == "copy_":
            read = read[1:]
        elif not name.endswith("_") and any(w is r for w in written for r in read):
            read, written = [], []
        self.recorded.append(Call(name, entries_and_bytes(read), entries_and_bytes(written)))
        return out


class RecordOps(_Recorder, TorchDispatchMode):
    """One level lower: inside a `with` block, records each ATen operator that moves data as a `Call`,
    forward and backward passes alike. An operator reads its tensor arguments and writes its results; an
    argument it writes into is written (an in-place operator's is read too, an `out=` argument is not).
    Views and allocations (`empty`) move no data and are skipped. Entries are counted as a tensor shows
    them, bytes as the memory behind them: an expanded view shows a value many times but holds it once."""

    ops = property(lambda self: self.recorded, doc="The recorded operators (`Call`s), in order.")

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs, out = self._run(func, args, kwargs)
        if func.is_view or func.name().startswith("aten::empty"):
            return out
        given = {**dict(zip((a.name for a in func._schema.arguments), args)), **kwargs}
        into = {a.name for a in func._schema.arguments if a.alias_info is not None and a.alias_info.is_write}
        read = [t for name, v in given.items() if name != "out" for t in tree_leaves(v) if isinstance(t, torch.Tensor)]
        changed = [t for name in into & given.keys() for t in tree_leaves(given[name]) if isinstance(t, torch.Tensor)]
        results = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor) and not any(t is c for c in changed)]
        self.recorded.append(Call(func.name(), entries_and_bytes(read), entries_and_bytes(changed + results)))
        return out


def total_bytes(ops) -> int:
    """Every byte the recorded operators read and write."""
    return sum(nbytes for op in ops for _, nbytes in (*op.read, *op.written))


def record(fn) -> list[Call]:
    """The ATen operators fn() runs (`RecordOps`), in order."""
    with RecordOps() as rec:
        fn()
    return rec.ops


def bounds(ops, x: torch.Tensor, *, x_sized_only: bool = False) -> tuple[int, float]:
    """(operators counted, bytes they read and write) of recorded operators, the bytes in one-pass bounds of x:
    2 x's bytes (x read once, a result of x's shape and dtype written once; `x * 1.5` moves exactly 1).

    x_sized_only keeps only tensors of at least half x's entries, and the operators that touch one: passes over
    x-sized data (the half layout works on x's halves). Otherwise every operator and every byte, small tables
    included. A tensor counts as `entries_and_bytes` counts it (an expanded view's values once). Two records move
    less than `RecordOps` charges: `_unsafe_view` (a view autograd does not track as one) moves nothing, and
    `copy_` writes its destination without reading it."""
    least = x.numel() // 2 if x_sized_only else 0
    counted = [op for op in ops if op.name != "aten::_unsafe_view" and op.size >= least]
    moved = sum(nbytes for op in counted for n, nbytes in (*op.read[op.name == "aten::copy_":], *op.written)
                if n >= least)
    return len(counted), moved / (2 * x.numel() * x.element_size())
