"""Checker for notebooks/10_making_it_fast.ipynb: RoPE's backward rotation written into the gradient itself.

The exercise is a design judged by what it does: the learner's function must leave R^T g in g (compared with the
library's out-of-place ``rotate_pairs`` by -angle, on gradients of the checker's own, some of them strided views)
while creating, in all its new tensors together, fewer elements than g has, so that an out-of-place result (g's size)
does not fit. The count is of allocations, added up, not a peak: every new tensor counts, even one freed before the call returns, so
an out-of-place rotation that allocates a fresh result for each small piece (small at any moment, all of g in total)
does not fit, while one that rotates each piece through one small buffer, allocated once and reused, does: it is a
legitimate low-memory design.
Every ATen operator the function reaches is watched
(a ``TorchDispatchMode``): an output that aliases none of its inputs is new memory and counts its elements, and so
does any tensor it uses that is not g, cos, sin or one it made (a scratch buffer made before the call); every change to g must be
made by an operator the count saw (g is compared before and after each write the count sees, so a write where the
count is switched off, or through numpy, shows as a change between them), cos and sin not changed at all; and ``tracemalloc`` measures what it makes outside
torch (numpy arrays, Python lists of the values). So a copy of the library's function, or of any out-of-place rotation, gains nothing:
it allocates a tensor of g's size.
"""
from __future__ import annotations

import tracemalloc
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from ..angles import rope_frequencies
from ..rope import rotate_pairs
from ._core import report

__all__ = ["rotate_back_in_place"]

OUTSIDE_BYTES = 32 * 1024  # what the function may make outside torch: Python objects, not a copy of half of g
# (every gradient below is at least 128 KiB; half of it in numpy would be 64 KiB, as Python floats far more)
_CASES = (  # (batch, heads, seq, d), layout, stored as (batch, seq, heads, d) and transposed: a strided view
    ((4, 4, 32, 64), "half", False),
    ((2, 8, 32, 64), "interleaved", False),
    ((2, 4, 64, 128), "half", True),
    ((4, 4, 64, 32), "interleaved", True),
)


def _inputs(shape: tuple[int, ...], layout: str, strided: bool, seed: int) -> tuple[torch.Tensor, ...]:
    """A float32 gradient g (batch, heads, seq, d) and the (seq, d/2) cos and sin of positions from an offset."""
    gen = torch.Generator().manual_seed(seed)
    b, h, s, d = shape
    g = torch.randn(b, s, h, d, generator=gen).transpose(1, 2) if strided else torch.randn(b, h, s, d, generator=gen)
    positions = torch.arange(s) + int(torch.randint(0, 5000, (), generator=gen))
    angles = positions[:, None].float() * rope_frequencies(d)
    return g, angles.cos(), angles.sin()


def _pairs(x: torch.Tensor, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The two members of every pair: features j and j + d/2 (half) or 2j and 2j + 1 (interleaved)."""
    d = x.shape[-1]
    return (x[..., : d // 2], x[..., d // 2:]) if layout == "half" else (x[..., 0::2], x[..., 1::2])


def _stale(g: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str, first_written: int) -> torch.Tensor:
    """A wrong result: the member written second computed from the member already overwritten."""
    out = g.clone()
    a, b = _pairs(out, layout)
    if first_written == 0:
        a.copy_(a * cos + b * sin)
        b.copy_(b * cos - a * sin)
    else:
        b.copy_(b * cos - a * sin)
        a.copy_(a * cos + b * sin)
    return out


class _Allocations(TorchDispatchMode):
    """Counts every new tensor the operators make, and notes tensors from elsewhere, in elements of g's size.

    A new storage counts its bytes divided by g's element size, whatever dtype it was made as: a float32 copy of g
    hidden in float64 or complex128 storage counts as all of g."""

    def __init__(self, *given: torch.Tensor) -> None:
        super().__init__()
        self.known = {t.untyped_storage().data_ptr() for t in given}
        self.target = given[0].untyped_storage().data_ptr()
        self.elements = 0
        self.g = given[0]
        self.last = self._bits()  # g as the last write the count saw left it
        self.unseen = False  # whether g changed where the count did not see it

    def _bits(self) -> torch.Tensor:
        return self.g.view(torch.int32).clone()  # compared bit for bit (a NaN equals itself)

    def changed_unseen(self) -> bool:
        """Whether g differs from what the last write the count saw left in it (call after the function)."""
        return self.unseen or not torch.equal(self.g.view(torch.int32), self.last)

    def _note(self, t: torch.Tensor) -> None:
        """A tensor from outside (made before the call, or where the count could not see it) counts as new."""
        ptr = t.untyped_storage().data_ptr()
        if t.numel() > 0 and ptr not in self.known:
            self.elements += t.untyped_storage().nbytes() // self.g.element_size()
            self.known.add(ptr)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        inputs = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        fresh_data = func in (torch.ops.aten.lift_fresh.default, torch.ops.aten.lift_fresh_copy.default)
        if not fresh_data:
            for t in inputs:
                self._note(t)
        written = [a for a, spec in zip(args, func._schema.arguments)
                   if isinstance(a, torch.Tensor) and spec.alias_info is not None and spec.alias_info.is_write]
        written += [kwargs[spec.name] for spec in func._schema.arguments
                    if spec.name in kwargs and spec.alias_info is not None and spec.alias_info.is_write
                    and isinstance(kwargs[spec.name], torch.Tensor)]
        writes_g = any(t.untyped_storage().data_ptr() == self.target for t in written)
        if writes_g:
            self.unseen |= self.changed_unseen()
        out = func(*args, **kwargs)
        if writes_g:
            self.last = self._bits()
        aliased = [r.alias_info is not None for r in func._schema.returns]
        in_ptrs = {t.untyped_storage().data_ptr() for t in inputs}
        results = out if isinstance(out, (tuple, list)) else (out,)
        for i, t in enumerate(results):
            if not isinstance(t, torch.Tensor):
                continue
            ptr = t.untyped_storage().data_ptr()
            alias = aliased[i] if i < len(aliased) else False
            if fresh_data or (not alias and ptr not in in_ptrs):  # new memory (not a view like _unsafe_view)
                self.elements += t.untyped_storage().nbytes() // self.g.element_size()
                self.known.add(ptr)
            elif alias:
                self._note(t)
        return out


def _close(x: torch.Tensor, y: torch.Tensor) -> bool:
    return bool(torch.allclose(x, y, rtol=1e-5, atol=1e-5))


def rotate_back_in_place(answer: Callable[..., Any] | None) -> bool | None:
    """answer(g, cos, sin, layout): overwrites g (..., seq, d), any strides, with R^T g, the rotation of every pair by
    -angle (cos, sin of shape (seq, d/2); layout "half" or "interleaved"), creating fewer than g.numel() elements
    in new tensors, added up over the call (not the peak), and nothing big outside torch."""

    def run(fn):
        for seed, (shape, layout, strided) in enumerate(_CASES):
            g, cos, sin = _inputs(shape, layout, strided, seed)
            g0, cos0, sin0, ptr, strides = g.clone(), cos.clone(), sin.clone(), g.data_ptr(), g.stride()
            expected = rotate_pairs(g0, cos0, -sin0, layout)
            where = f"{layout} layout, {'a strided view' if strided else 'contiguous'} g of {tuple(g.shape)}"
            budget = g.numel() - 1  # fewer elements than g: an out-of-place result alone is g's size
            tracing = tracemalloc.is_tracing()
            try:
                with _Allocations(g0, cos, sin):  # once unmeasured: torch's and Python's first-use caches
                    fn(g0.clone(), cos, sin, layout)
                if not tracing:
                    tracemalloc.start()
                tracemalloc.reset_peak()
                start = tracemalloc.get_traced_memory()[0]
                with _Allocations(g, cos, sin) as seen:
                    fn(g, cos, sin, layout)
                outside = tracemalloc.get_traced_memory()[1] - start
            except NotImplementedError:
                raise
            except Exception as e:  # a learner's bug in one case: name the case, go on to the next
                yield False, f"{where}: your function raised {type(e).__name__}: {e}"
                continue
            finally:
                if not tracing and tracemalloc.is_tracing():
                    tracemalloc.stop()
            if not (torch.equal(cos, cos0) and torch.equal(sin, sin0)):
                yield False, f"{where}: the function changes cos or sin; only g is its to overwrite"
                continue
            if seen.elements > budget:
                yield False, (f"{where}: the function creates (or brings in from outside) {seen.elements:,} elements "
                              f"(bytes over g's element size) of tensors other than g, cos and sin, added up over "
                              f"the call (freed ones count too: the rule is not a peak); the budget is fewer than g's own "
                              f"{g.numel():,}. Every out-of-place expression (a product such as b * sin, a clone, "
                              f"a copy) allocates a new tensor for its result")
                continue
            if outside > OUTSIDE_BYTES:
                yield False, (f"{where}: the function makes {outside:,} bytes outside torch's tensors (numpy arrays, "
                              f"Python lists); the budget there is {OUTSIDE_BYTES:,}")
                continue
            if seen.changed_unseen():
                yield False, (f"{where}: g was changed where the count could not see it (numpy, or the count "
                              "switched off)")
                continue
            if g.data_ptr() != ptr or g.stride() != strides:
                yield False, f"{where}: g no longer holds its own memory: the result must be written into it"
                continue
            if _close(g, expected):
                yield True, f"{where}: g holds R^T g, with {seen.elements:,} new elements (g has {g.numel():,})"
                continue
            other = "interleaved" if layout == "half" else "half"
            if torch.equal(g, g0):
                yield False, f"{where}: g is unchanged (what the function returns is not read)"
            elif _close(g, rotate_pairs(g0, cos0, sin0, layout)):
                yield False, f"{where}: g holds R g, the forward rotation (by +angle), not its transpose"
            elif _close(g, rotate_pairs(g0, cos0, -sin0, other)):
                yield False, f"{where}: g is rotated as if its pairs were laid out as {other!r}"
            elif any(_close(g, _stale(g0, cos0, sin0, layout, first)) for first in (0, 1)):
                yield False, (f"{where}: one member of each pair is computed from the other member after that "
                              "member was overwritten")
            else:
                yield False, f"{where}: g differs from R^T g by up to {(g - expected).abs().max().item():.3g}"

    return report("RoPE's backward rotation in place", answer, run,
                  "each new member of a pair is made from both old members.")
