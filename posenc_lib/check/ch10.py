"""Checker for notebooks/10_making_it_fast.ipynb: RoPE's backward rotation written into the gradient itself, and a
prediction of the tables' bytes in a training step (``tables_in_a_step``, at the end of this module).

The exercise is a design judged by what it does: the learner's function must leave R^T g in g (compared with the
library's out-of-place ``rotate_pairs`` by -angle, on gradients of the checker's own, some of them strided views)
while creating, in all its new tensors together, fewer elements than g has, so that an out-of-place result (g's size)
does not fit. The count is of allocations, added up, not a peak: every new tensor counts, even one freed before the
call returns (tests/test_check_ch10.py lists the designs that pass and those that do not).
Every ATen operator the function reaches is watched
(a ``TorchDispatchMode``): an output that aliases none of its inputs is new memory and counts its elements, and so
does any tensor it uses that is not g, cos, sin or one it made (a scratch buffer made before the call); every change to g must be
made by an operator the count saw (g is compared before and after each write the count sees, so a write where the
count is switched off, or through numpy, shows as a change between them), cos and sin not changed at all; and ``tracemalloc`` measures what it makes outside
torch (numpy arrays, Python lists of the values). So a copy of the library's function, or of any out-of-place rotation, gains nothing:
it allocates a tensor of g's size.
"""
from __future__ import annotations

import numbers
import tracemalloc
from fractions import Fraction
from typing import Any, Callable, Iterable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from ..angles import rope_frequencies
from ..rope import rotate_pairs
from ._core import Verdict, report, sealed

__all__ = ["rotate_back_in_place", "tables_in_a_step"]

OUTSIDE_BYTES = 32 * 1024  # what the function may make outside torch: Python objects, not a copy of half of g
# (every gradient below is at least 128 KiB; half of it in numpy would be 64 KiB, as Python floats far more)
_CASES = (  # (batch, heads, seq, d), layout, how g is stored: contiguous; "transposed", stored as
    # (batch, seq, heads, d) and transposed; "sliced", every other feature of a (batch, heads, seq, 2d) tensor, so
    # that its last stride is 2
    ((4, 4, 32, 64), "half", "contiguous"),
    ((2, 8, 32, 64), "interleaved", "contiguous"),
    ((2, 4, 64, 128), "half", "transposed"),
    ((4, 4, 64, 32), "interleaved", "transposed"),
    ((4, 4, 32, 64), "interleaved", "sliced"),
)
_STORED = {"contiguous": "contiguous", "transposed": "a transposed view", "sliced": "a view with last stride 2"}


def _inputs(shape: tuple[int, ...], layout: str, stored: str, seed: int) -> tuple[torch.Tensor, ...]:
    """A float32 gradient g (batch, heads, seq, d) and the (seq, d/2) cos and sin of positions from an offset."""
    gen = torch.Generator().manual_seed(seed)
    b, h, s, d = shape
    if stored == "transposed":
        g = torch.randn(b, s, h, d, generator=gen).transpose(1, 2)
    elif stored == "sliced":
        g = torch.randn(b, h, s, 2 * d, generator=gen)[..., ::2]
    else:
        g = torch.randn(b, h, s, d, generator=gen)
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
    hidden in float64 or complex128 storage counts as all of g.

    A storage is known by its address, so the count keeps every storage it has counted alive while it counts: a
    tensor freed during the call cannot hand its address to a later one, which then counts again (a rotation made
    out of place per slice where the count is off, each result copied into g and freed, counts every result)."""

    def __init__(self, *given: torch.Tensor) -> None:
        super().__init__()
        self.known = {t.untyped_storage().data_ptr() for t in given}
        self.held: list[torch.UntypedStorage] = []  # every storage counted, kept alive so no address is reused
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
            self._count(t)

    def _count(self, t: torch.Tensor) -> None:
        """Count t's storage as new, and keep it alive while the count runs, so that its address stays its own."""
        storage = t.untyped_storage()
        self.elements += storage.nbytes() // self.g.element_size()
        self.known.add(storage.data_ptr())
        self.held.append(storage)

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
                self._count(t)
            elif alias:
                self._note(t)
        return out


def _close(x: torch.Tensor, y: torch.Tensor) -> bool:
    return bool(torch.allclose(x, y, rtol=1e-5, atol=1e-5))


def _how_far(g: torch.Tensor, expected: torch.Tensor) -> str:
    """How far g is from the expected result: the largest difference, or how many entries are not finite (a NaN
    has no size, so a maximum over it would print nan)."""
    bad = int((~torch.isfinite(g)).sum())
    if bad:
        return f"NaN or infinite at {bad:,} of its {g.numel():,} entries"
    return f"off by up to {(g - expected).abs().max().item():.3g}"


def _off_only_near(g: torch.Tensor, expected: torch.Tensor, cos: torch.Tensor, layout: str) -> str | None:
    """Whether g is off only at pairs whose cos is near 0 or near -1 (a division by a number that vanishes there):
    "0" or "-1", else None."""
    (ga, gb), (ea, eb) = _pairs(g, layout), _pairs(expected, layout)
    off = ~(torch.isclose(ga, ea, rtol=1e-5, atol=1e-5) & torch.isclose(gb, eb, rtol=1e-5, atol=1e-5))
    if not off.any():
        return None
    c = cos.expand_as(off)
    for near, value in ((c.abs(), "0"), ((1 + c).abs(), "-1")):
        if bool((near[off] < 0.1).all()):
            return value
    return None


_NEW_ELEMENTS: list[int] = []  # the new elements of each passing case of the last run (read by the tests only)


def rotate_back_in_place(answer: Callable[..., Any] | None) -> bool | None:
    """answer(g, cos, sin, layout): overwrites g (..., seq, d), any strides, with R^T g, the rotation of every pair by
    -angle (cos, sin of shape (seq, d/2); layout "half" or "interleaved"), creating fewer than g.numel() elements
    in new tensors, added up over the call (not the peak), and nothing big outside torch."""

    def run(fn):
        _NEW_ELEMENTS.clear()
        for seed, (shape, layout, stored) in enumerate(_CASES):
            g, cos, sin = _inputs(shape, layout, stored, seed)
            g0, cos0, sin0, ptr, strides = g.clone(), cos.clone(), sin.clone(), g.data_ptr(), g.stride()
            whole = torch.as_strided(g, (g.untyped_storage().nbytes() // g.element_size(),), (1,), 0)  # g's storage
            around = whole.clone()  # to check that only g's own entries change (a slice's neighbours do not)
            outside_g = torch.ones_like(whole, dtype=torch.bool)
            torch.as_strided(outside_g, g.shape, g.stride(), g.storage_offset()).fill_(False)
            expected = rotate_pairs(g0, cos0, -sin0, layout)
            where = f"{layout} layout, {_STORED[stored]} g of {tuple(g.shape)}"
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
                why = (f" (g's last stride here is {g.stride(-1)}: your function assumes that g's last dimension is "
                       "contiguous, its entries adjacent in memory, which \"any strides\" does not promise)"
                       if g.stride(-1) != 1 else "")
                yield False, f"{where}: your function raised {type(e).__name__}: {e}{why}"
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
            if not torch.equal(whole[outside_g].view(torch.int32), around[outside_g].view(torch.int32)):
                yield False, f"{where}: the function writes into memory next to g's entries that is not g's"
                continue
            if _close(g, expected):
                _NEW_ELEMENTS.append(seen.elements)  # for tests; printed, the count would show the design's
                yield True, f"{where}: g holds R^T g, within the budget (fewer new elements than g has)"
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
            elif (near := _off_only_near(g, expected, cos0, layout)) is not None:
                yield False, (f"{where}: g is R^T g except at pairs whose cos is near {near}, where it is "
                              f"{_how_far(g, expected)}: a step "
                              "divides by a number that comes near zero at those angles, and dividing by it "
                              "magnifies the rounding of what it divides, without bound")
            else:
                yield False, f"{where}: g differs from R^T g: {_how_far(g, expected)}"

    return report("RoPE's backward rotation in place", answer, run,
                  "each new member of a pair is made from both old members.")


# ---------------------------------------------------------------- Exercise 1 (prediction): the tables in a step
# The learner's fn(batch, heads, seq, d, itemsize) predicts every byte of RotaryEmbedding's training step on the C
# operator (x, g, results, and the float32 cos and sin tables read in both passes), in one-pass bounds of x, as an
# exact number. The cases are sizes no tensor can have (up to 10^40 positions), so a count on the meta device, which
# answers the appendix's own instance, cannot answer them; only the right count, made as a formula, does. The checker
# holds salted digests of the answers and of the expected wrong ones, never the answers.
_STEP_RIGHT = {  # sealed([batch, heads, seq, d, itemsize, numerator, denominator], "ch10.tables_in_a_step")
    (3, 1000000000000000000000000000000, 1000000000000, 256, 2): '78d2ac4dcb0ab7fec81af31b',
    (7, 5, 10000000000000000000000000000000000000000, 64, 1): 'c5762ba9b50ebdb20e1ca54e',
    (3, 10000000000000000000000003, 4096, 100000000000000000000, 8): '5ceffdf1ba9aa8b8ad8531d5',
    (1000000000000000000, 3, 3, 2, 2): 'e5398cd68ba5da0b5028d7a1',
    (6, 9, 1000000000000000000000000000000000, 1000000000, 1): 'dfa1383265a2262f97a08bed',
}
_STEP_WRONG = {  # sealed wrong answers -> the misconceptions they match (two may coincide in one case; where two
    # slips give the same number in every case, one message names them all: "per_feature" is also the tables' bytes
    # over x's bytes and tables weighed at 8 bytes, "one_pass_tables" also one table counted and tables weighed at
    # 2 bytes, "stateless" also both tables, or a -sin table alone, written for the backward pass)
    'a60e44d25b46e0de62496c51': ('per_head',),
    '0f36ced78e956cf2ddcea8f3': ('per_head',),
    '4985c0560be60aee5d633ad9': ('per_head',),
    '91e3c30b35fc522a261915fb': ('per_head',),
    'ac06d4d4e7f33f17e317f6c1': ('per_head',),
    '673415c8eba7cc3e92152af9': ('per_sequence',),
    'bfad69ee58dfa89c22c3bb5c': ('per_sequence',),
    '52bbac342e78d1e3ac7b33fe': ('per_sequence',),
    'e94f24c79c65b1a606fc5a5a': ('per_sequence',),
    'd385e8e7bc9815767ee3e115': ('per_sequence',),
    '36fe2da416570fa15a85d97c': ('x_dtype', 'one_pass_tables'),
    '2627d0a215e1ae90202cd6b1': ('x_dtype',),
    '01d49318e30e0eed2049cc58': ('x_dtype', 'per_feature'),
    'fdcba941f7e3213cfb247389': ('x_dtype', 'one_pass_tables'),
    '1b77afc037cc2cb54ffc72a9': ('x_dtype',),
    '5d245b86e523d24b0e55f55a': ('one_pass_tables', 'fixed_itemsize'),
    '30ce1e8c6ac09ff64dd86383': ('fixed_itemsize',),
    '921214716288f83ec627b82f': ('one_pass_tables',),
    '60f8f425c31e53c681668c8a': ('one_pass_tables', 'fixed_itemsize'),
    '6848c1a2bdde6905c072115a': ('no_tables',),
    '3e6eb1e7fe7d0752c333bdf3': ('no_tables',),
    'bd6f14291208b1b34720e185': ('no_tables',),
    'f47ec1cfac8d6065e1d2dc54': ('no_tables',),
    'edf7f4fdc2b1d12e7ab783ee': ('no_tables',),
    'fefe85eda90ba660529d1e90': ('per_feature', 'cast_per_pass'),
    '0cb78eb2480de27f1c35f0ff': ('per_feature',),
    '65e083b2ba24d2e5ef6e56c1': ('per_feature', 'cast_per_pass'),
    'f13892d6ad35ee84e14b81ce': ('per_feature',),
    '4528ea777fc638df5b150501': ('forward_only',),
    '9386ec706f27979e016b1c6a': ('forward_only',),
    '678b7004eb170d1470ac9a22': ('forward_only',),
    'ad2a5a9ea11fc9cba077b782': ('forward_only',),
    '367f3d88a2bc78ff51a9714b': ('forward_only',),
    'e40fbc40e88b7dcb4c70aec4': ('cast_per_pass', 'stateless'),
    '30d575171d0d8f117a3e1445': ('cast_per_pass',),
    'bf4d8050b9450080fbc8f77c': ('cast_per_pass', 'stateless'),
    '6638ecf3616681ad39b8094e': ('stateless',),
    'f7f5dec5432c99f3a6effc02': ('stateless',),
    '65668a6dde926ad03ce333f8': ('stateless',),
    '1c447aa9f909f6859d742fab': ('cast_once', 'stateless'),
    '14f17ae2b13ab77cd0b90f8e': ('cast_once',),
    'd738b897b64d3ed1fd3089c8': ('cast_once',),
    '7aa603704e92e341bd0e1067': ('cast_once', 'stateless'),
    '8bd48019c0e15061e54c04a8': ('stateless',), '32280739573a36e6a8f3d27a': ('stateless',),
    'a87a08ff76433c605f7c7ce3': ('stateless',),
    '855e724c9c1ab042b52dd3fe': ('cast_once',),
    '70423529348c36725468b083': ('per_head_shared',), 'b870a91339154b91fd3137ec': ('per_head_shared',),
    '90b61f732f0448b40c649f73': ('per_head_shared',), '569514d9e9b2ab238b5fc459': ('per_head_shared',),
    '8390951e8edb68d5273082f7': ('per_head_shared',),
    'd1e1a00c03f3719f37b04ed1': ('saved_x',), 'cdc60d7518d20a6c2e22f730': ('saved_x',),
    'b73365e7ac9d967232477db2': ('saved_x',), '1a0305f4d19b60b5fc4a979f': ('saved_x',),
    '4e16356b53baafaf577ab177': ('saved_x',),
    'a4c735e24fc4b317d211f353': ('x_bytes_unit',), '6e02b28e95b83acf5613101d': ('x_bytes_unit',),
    '5f67dbcf8d85de0ebb959c06': ('x_bytes_unit',), '4479fe045c6898b6e5159ad3': ('x_bytes_unit',),
    'ea766249db63b702d54cee1f': ('x_bytes_unit',),
}
_STEP_MISCONCEPTIONS = {
    "per_head": "your answers match a count with one copy of the tables for every head of every sequence",
    "per_sequence": "your answers match a count with one copy of the tables for every sequence of the batch",
    "per_head_shared": ("your answers match a count with one copy of the tables for every head, shared by the "
                        "batch's sequences"),
    "x_dtype": "your answers match a count that weighs the tables' entries in x's dtype",
    "saved_x": ("your answers match a count in which the backward pass reads x again; what does a rotation's "
                "backward need besides the incoming gradient and the tables?"),
    "one_pass_tables": ("your answers match any of three counts that give the same number: the tables read in only "
                        "one of the step's two passes, only one of the two tables (cos or sin) counted, or the "
                        "tables' entries weighed at 2 bytes each (they are float32)"),
    "fixed_itemsize": ("your answers are right where x has 2 bytes per entry and wrong at the other sizes: your "
                       "count weighs x in one fixed dtype, not in the itemsize it is given"),
    "stateless": ("your answers match a count that writes table-sized tensors in the step besides reading the "
                  "tables: either tables made inside the step, as the stateless apply_rope makes them (the module, "
                  "from its second call, reuses the tables it cached), or a table of its own made for the backward "
                  "pass, a -sin table say (a rotation by -angle needs none: cos(-a) = cos a, sin(-a) = -sin a)"),
    "no_tables": "your answers match a count that leaves the tables out",
    "per_feature": ("your answers match any of three counts that give the same number: a table entry for every "
                    "feature of x, the tables' bytes divided by x's bytes rather than by a one-pass bound's (x "
                    "read once and a result of x's size written once), or the tables' entries weighed at 8 bytes "
                    "each (they are float32)"),
    "forward_only": "your answers match a count of the forward pass alone",
    "x_bytes_unit": ("your answers match the step's bytes counted in units of x's bytes; the unit asked for is a "
                     "one-pass bound (x read once and a result of x's size written once)"),
    "cast_per_pass": ("your answers match a count with a temporary copy of the tables cast to x's dtype (a bfloat16 "
                      "copy for a bf16 x), written and read again in each pass"),
    "cast_once": ("your answers match a count with a temporary copy of the tables cast to x's dtype (a bfloat16 "
                  "copy for a bf16 x), made once and read in both passes"),
}


# the one hint, for the misconceptions it addresses: tables counted per head or per sequence
_STEP_SHARING = ("per_head", "per_sequence", "per_head_shared")
_STEP_SHARING_HINT = "a table belongs to a position, not to the tensors that are rotated at that position."


# A wrong answer no digest names (two slips at once, say) is read by its shape, probed at more sizes: how it changes
# with each of the five sizes, and the part that stays when the tables' share shrinks to nothing, got exactly from
# two probes (Richardson's step: for f = A + c/v, A = 2 f(2v) - f(v)). The shapes and the digests of wrong parts
# hold no answer.
_STEP_PROBE = (3, 5, 12, 64, 2)  # batch, heads, seq, d, itemsize: the sizes each probe varies one at a time
_STEP_X_PART = {  # sealed([numerator, denominator], "ch10.tables_in_a_step/x_part") of a wrong part without tables
    "c0eafa39626a8f4b50c0ffab": "a count of the forward pass alone",
    "59f4e0eeff88e972287cf858": "a count in which the backward pass reads x again",
    "055063cf2b1fb62f5e2dac1c": "a count in units of x's bytes, not of one-pass bounds",
}
_STEP_SHAPES = {
    "seq": ("your count changes when only seq changes: it does not count x and the tables as both growing with the "
            "number of positions"),
    "d": "your count changes when only d changes: it does not count x and the tables as both growing with the width d",
    "per_sequence": ("your count does not change with batch: it counts a copy of the tables for every sequence of the "
                     "batch"),
    "per_head_shared": "your count does not change with heads: it counts a copy of the tables for every head",
    "per_head": ("your count changes with neither batch nor heads: it counts a copy of the tables for every head of "
                 "every sequence"),
    "dtype": ("your count does not change with itemsize: it weighs the tables in x's dtype, or x in one fixed dtype, "
              "where each has its own"),
    "constant": ("your count changes with none of batch, heads and itemsize: it leaves the tables out, or counts "
                 "them for every head of every sequence in x's dtype"),
}


def _step_shape(fn: Callable[[int, int, int, int, int], Any]) -> list[str]:
    """The misconceptions the shape of a wrong fn shows (messages), [] where it shows none or a probe fails."""

    def at(**sizes: int) -> Fraction:
        case = dict(zip(("batch", "heads", "seq", "d", "itemsize"), _STEP_PROBE), **sizes)
        value = _exact(fn(*case.values()))
        if value is None:
            raise ValueError("not exact")
        return value

    try:
        base = at()
        moved = [name for name, sizes in (("seq", ({"seq": 1000}, {"seq": 10**15})), ("d", ({"d": 2}, {"d": 1000})))
                 if any(at(**size) != base for size in sizes)]
        if moved:
            return [_STEP_SHAPES[name] for name in moved]
        falls, x_part = {}, None
        for name in ("batch", "heads", "itemsize"):
            v = _STEP_PROBE[("batch", "heads", "seq", "d", "itemsize").index(name)]
            f1, f2, f4 = base, at(**{name: 2 * v}), at(**{name: 4 * v})
            falls[name] = "no" if f1 == f2 == f4 else "as 1/v" if f1 != f2 and f1 - f2 == 2 * (f2 - f4) else "other"
            if falls[name] == "as 1/v" and x_part is None:
                x_part = 2 * f2 - f1  # what stays as the tables' share shrinks to nothing
    except Exception:  # noqa: BLE001 (a probe the learner's code does not take: no reading)
        return []
    if all(how == "no" for how in falls.values()):
        x_part = base
    found = []
    if all(how == "no" for how in falls.values()):
        found.append(_STEP_SHAPES["constant"])
    elif falls["batch"] == "no" and falls["heads"] == "no":
        found.append(_STEP_SHAPES["per_head"])
    elif falls["batch"] == "no":
        found.append(_STEP_SHAPES["per_sequence"])
    elif falls["heads"] == "no":
        found.append(_STEP_SHAPES["per_head_shared"])
    if falls["itemsize"] == "no" and not all(how == "no" for how in falls.values()):
        found.append(_STEP_SHAPES["dtype"])
    if x_part is not None:
        wrong = _STEP_X_PART.get(sealed([x_part.numerator, x_part.denominator], "ch10.tables_in_a_step/x_part"))
        if wrong:
            found.append(f"the part of your count that stays when the tables' share shrinks to nothing matches {wrong}")
    return found


def _exact(value: Any) -> Fraction | None:
    """value as a Fraction when it is an exact rational number (an int, a Fraction), else None."""
    if isinstance(value, bool) or not isinstance(value, numbers.Rational):
        return None
    return Fraction(value)


def tables_in_a_step(fn: Callable[[int, int, int, int, int], Any] | None) -> bool | None:
    """Exercise 1: fn(batch, heads, seq, d, itemsize) -> the bytes of RotaryEmbedding's training step on the C
    operator, tables included, in one-pass bounds of x, as an exact number (a Fraction or an int)."""

    def run(fn: Callable[[int, int, int, int, int], Any]) -> Iterable[Verdict]:
        named: dict[str, list[str]] = {}
        first_wrong, wrong_cases, values = None, 0, set()
        for case, right in _STEP_RIGHT.items():
            where = "step_bounds({}, {}, {}, {}, {})".format(*case)
            raw = fn(*case)
            got = _exact(raw)
            if got is None:
                yield False, (f"{where}: expected an exact number (a fractions.Fraction or an int), got {raw!r:.60}; "
                              "a float cannot hold these values exactly")
                return
            values.add(got)
            digest = sealed([*case, got.numerator, got.denominator], "ch10.tables_in_a_step")
            if digest == right:
                continue
            wrong_cases += 1
            first_wrong = first_wrong or where
            for name in _STEP_WRONG.get(digest, ()):
                named.setdefault(name, []).append(where)
        name = max(named, key=lambda n: len(named[n])) if named else None
        # a number that no size moves is a measured instance (the appendix's 2 + 1/4, say), unless it is a count
        # that no size moves: the tables left out (named above) or copied per head in x's dtype (one bound: 3)
        if (first_wrong and len(values) == 1 and values != {3}
                and not (name and len(named[name]) == wrong_cases)):
            yield False, (f"{first_wrong}: your count does not change with the sizes: a measured instance, not a "
                          "count")
            return
        shape = _step_shape(fn) if first_wrong and (name is None or len(named[name]) < wrong_cases) else []
        if shape:  # what the answer's shape shows, where no digest names every wrong case
            sharing = any(_STEP_SHAPES[n] in shape for n in ("per_head", "per_sequence", "per_head_shared"))
            hint = f"\n  hint: {_STEP_SHARING_HINT}" if sharing else ""
            yield False, f"{first_wrong}: not the bytes of that step; " + "; ".join(shape) + hint
            return
        if name and len(named[name]) == wrong_cases:  # a misconception is named only where it fits every wrong
            # case: one that coincides with the answer at some sizes (a bf16 x, say) is a different count
            hint = f"\n  hint: {_STEP_SHARING_HINT}" if name in _STEP_SHARING else ""
            yield False, f"{named[name][0]}: {_STEP_MISCONCEPTIONS[name]}{hint}"
            return
        if first_wrong is not None:
            yield False, f"{first_wrong}: not the bytes of that step"
            return
        yield True, f"right at {len(_STEP_RIGHT)} sizes, none of which a tensor could have"

    return report("the tables' bytes in a training step", fn, run, "")  # the hint goes with its misconceptions
