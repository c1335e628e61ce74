"""RoPE as callers use it (``apply_rope``, ``apply_rope_compiled``, ``RotaryEmbedding``), and
``rotate``, the one place that picks how a rotation is computed.

``posenc_lib/rope.py`` is the reference: it says what is computed and imports no fast path.
``posenc_lib/kernels/`` computes the same numbers faster and imports the reference. This
module sits above both: every entry point here runs the reference's steps
(``rope.rotate_at_positions``) with the rotation step handed to ``rotate``, which takes
the first path that applies:

0. the reference ``rope.rotate_in_float32`` for a CPU tensor of fewer than ``SMALL``
   elements: below that size the kernel's fixed cost per call eats most of what it saves
   (at most about 21 us a call in bfloat16, 18 us in float32; benchmarks/README.md, "Where the C
   kernel pays off"), and a chapter-sized example (``apply_rope(torch.randn(5, 4))``) never builds or loads the C kernel;
1. ``kernels.cpu``: CPU float32/bfloat16, contiguous, a C compiler found: one pass,
   bit-identical to ``rotate_in_float32``, with a backward (``torch.ops.posenc.rope_rotate``);
2. ``kernels.triton_rope``: CUDA, where Triton is installed, with or without gradients: one
   pass, the reference's arithmetic on the given tables (``torch.ops.posenc.rope_triton``);
3. ``kernels.torch_fast``: CPU or CUDA without gradients: two or fewer torch passes;
4. ``rope.rotate_in_float32`` (the reference): everything else, e.g. gradients through cos/sin,
   the meta and MPS devices.
Every path gives the reference's numbers: bit for bit on the C kernel and the Triton kernel's
table path, up to the last rounding step on the torch path.

On CUDA with Triton, ``apply_rope`` and ``RotaryEmbedding`` go one step further (``_fused``):
one launch rotates q and k together with their angles made inside the kernel, from the
positions and ``inv_freq`` (``apply_rope``, explicit positions) or read from the module's
cos/sin cache (``RotaryEmbedding``), so no cos/sin table is built for the call. This is the same
choice as ``rotate``'s, made one level up, where the positions are still known.
Names: d = head dimension, r = rotated features (``rotary_dim``, d unless partial).
"""
from __future__ import annotations

import importlib.util
from dataclasses import fields, replace
from types import ModuleType

import torch
from torch import Tensor, nn

from . import _validate as v
from .angles import checked_frequencies, rope_angles, rope_frequencies
from .kernels import compiled, cpu, torch_fast
from .rope import (RopeOptions, position_angles, rope_tables, rotate_at_positions, rotate_in_float32,
                   rotate_partial, sequence_positions)

# Below this many elements a CPU tensor is rotated by the reference. Measured on a 2-core
# Xeon VM (benchmarks/bench_rope.py, ``run_small``): the C kernel's fixed cost per call (about
# 14 us, as much as the reference's eight small torch calls) is paid back from about 2^12
# elements (interleaved, forward) to 2^14 (half layout, and forward + backward), where the
# kernel is faster in every case.
SMALL = 1 << 14


def _load_triton_rope() -> ModuleType | None:
    """``kernels.triton_rope`` for a torch build with a GPU backend where Triton is installed, else None.

    Imported here, once: it imports Triton (most of a second), which a CPU build of torch never
    needs, and ``torch.compile`` then sees a plain module attribute rather than an import.
    """
    if not (torch.version.cuda or torch.version.hip) or importlib.util.find_spec("triton") is None:
        return None
    try:
        from .kernels import triton_rope
    except ImportError:  # a Triton too old or broken for the kernel: the torch paths serve CUDA
        return None
    return triton_rope


triton_rope = _load_triton_rope()


def rotate(x: Tensor, cos: Tensor, sin: Tensor, layout: str) -> Tensor:
    """R x by the first path that applies (module docstring); the numbers of ``rope.rotate_in_float32``.

    x: (..., seq, d); cos, sin: broadcastable to (..., seq, d/2), float32 (float64 for float64 x)
    returns: a new tensor with x's shape, dtype and device
    """
    if x.device.type == "cpu" and x.numel() < SMALL:
        return rotate_in_float32(x, cos, sin, layout)
    if cpu.applies(x, cos, sin):
        return cpu.rope_rotate(x, cos, sin, layout == "interleaved", False)
    if triton_rope is not None and triton_rope.applies_tables(x, cos, sin):
        return triton_rope.rotate(x, cos, sin, layout)
    if torch_fast.applies(x, cos, sin):
        return torch_fast.rotate(x, cos, sin, layout)
    return rotate_in_float32(x, cos, sin, layout)


def _fused(x: Tensor, *angle_inputs: Tensor | None) -> bool:
    """Whether the Triton kernel takes the whole call, angles included (module docstring): x on its device,
    the frequencies or tables on x's device and needing no gradient (the kernel differentiates x only)."""
    return triton_rope is not None and triton_rope.applies(x, *angle_inputs)


def _rope_in_kernel(q: Tensor, k: Tensor | None, positions: Tensor | None, options: RopeOptions,
                    inv_freq: Tensor | None, r: int) -> tuple[Tensor, Tensor | None]:
    """q (and k) rotated by the Triton kernel with angles from positions (or 0, 1, ...) and inv_freq, as
    ``rotate_at_positions`` would rotate them: the frequencies are the reference's (float64 for float64 x)."""
    if inv_freq is None:
        dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
        inv_freq = rope_frequencies(r, base=options.base, device=q.device, dtype=dtype)
    else:
        inv_freq = checked_frequencies(inv_freq, r, q.device)
    return triton_rope.rope(q, k, positions=positions, inv_freq=inv_freq, rotary_dim=r,
                            attention_factor=options.attention_factor, layout=options.layout)


def apply_rope(
    x: Tensor,
    positions: Tensor | None = None,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
    inv_freq: Tensor | None = None,
    attention_factor: float = 1.0,
    rotary_dim: int | None = None,
) -> Tensor:
    """Rotate queries or keys by their positions: out[..., m, :] = R_m x[..., m, :].

    x:         (..., seq, d), d even, e.g. (batch, heads, seq, head_dim)
    positions: None (0..seq-1), (seq,) or (batch, seq) integer tensor
    layout:    "interleaved" or "half" (see posenc_lib/rope.py)
    inv_freq:  (r // 2,) frequencies to use instead of base**(-2j/r) (context extension),
               r = rotary_dim or d
    attention_factor: multiplies the rotated features (YaRN's magnitude correction)
    rotary_dim: r, even, <= d: rotate only the first r features of each head (pairs laid
               out within them) and pass the other d - r through unchanged (partial
               rotary: GPT-NeoX, Phi, DeepSeek). None means r = d. As in transformers,
               attention_factor scales the rotated features only.
    returns:   same shape, dtype and device as x. Angles, cos and sin are computed in
               float32 (float64 for float64 x); half-precision x is rotated in float32
               and cast back. Stateless: cos and sin are computed on every call (a model
               keeps them in ``RotaryEmbedding``'s cache). The numbers are
               ``rope.rotate_at_positions``'s (the reference); only the speed depends on the path (``rotate``).
    Taught in: notebooks/05_rope.ipynb (rotary_dim: notebooks/08_rope_in_models.ipynb)
    """
    options = RopeOptions(base, layout, inv_freq, attention_factor, rotary_dim)
    if _fused(x, options.inv_freq):
        r = options.rotated_features(v.sequence_tensor("x", x).shape[-1])
        if positions is not None:
            positions = sequence_positions(positions, x)
        return _rope_in_kernel(x, None, positions, options, options.inv_freq, r)[0]
    return rotate_at_positions(x, positions, options, rotate)


def rotate_compiled(x: Tensor, cos: Tensor, sin: Tensor, layout: str) -> Tensor:
    """``kernels.compiled``'s fused rotation where it applies (CPU or CUDA, no gradients), else ``rotate``."""
    if compiled.applies(x, cos, sin):
        return compiled.rotate(x, cos, sin, layout)
    return rotate(x, cos, sin, layout)


def apply_rope_compiled(x: Tensor, positions: Tensor | None = None, **options) -> Tensor:
    """``apply_rope`` with the rotation fused into one ``torch.compile`` kernel (opt-in).

    options: ``apply_rope``'s keywords (``rope.RopeOptions``: base, layout, inv_freq,
    attention_factor, rotary_dim), passed on as they are, so the two never drift apart; the same
    body runs both, with the same result and precision rules. The first call per layout compiles
    (seconds to tens of seconds on a CPU, and it needs a C++ compiler there); later calls make
    one pass over x. Calls that need gradients or run on other devices than CPU/CUDA take
    ``apply_rope``'s paths. On the CPU the C kernel is faster and needs no compile step; on a
    CUDA GPU with Triton, ``apply_rope`` itself takes the one-pass Triton kernel (``kernels/triton_rope.py``).
    x: (..., seq, d); positions: None, (seq,) or (batch, seq)
    returns: same shape, dtype and device as x
    """
    return rotate_at_positions(x, positions, RopeOptions(**options), rotate_compiled)


class RotaryEmbedding(nn.Module):
    """RoPE as a module: (q, k) -> (R q, R k), with its cos/sin tables cached.

    The module owns its tables (as torchtune's and rotary-embedding-torch's do): non-persistent
    buffers ``cos_cached``/``sin_cached`` of shape (n, r/2) for positions 0..n-1, grown when a
    longer sequence arrives and moved by ``.to(device)``; checkpoints do not carry them. They
    stay float32 even if the module is cast with ``.to(torch.bfloat16)``: angles need the bits.
    The forward pass reads sizes from shapes only, so it never synchronises with a GPU.
    Arguments as ``apply_rope``'s (``rope.RopeOptions``, kept in ``options``); to evaluate a model
    with other frequencies, swap in ``reconfigured(inv_freq=..., attention_factor=...)``.

    q, k:      (..., seq, d) (q and k may have different lengths)
    positions: None (offset, offset + 1, ...), or a (seq,) / (batch, seq) integer tensor
               (computed on the spot, without the cache)
    offset:    first position when positions is None (e.g. the KV-cache length when decoding)
    rotary_dim: rotate only the first rotary_dim of the d features (see ``apply_rope``);
               inv_freq and the tables then have rotary_dim/2 columns
    Taught in: notebooks/05_rope.ipynb (offset and rotary_dim: notebooks/08_rope_in_models.ipynb)
    """

    def __init__(
        self,
        d: int,
        *,
        base: float = 10000.0,
        layout: str = "interleaved",
        inv_freq: Tensor | None = None,
        attention_factor: float = 1.0,
        rotary_dim: int | None = None,
    ):
        super().__init__()
        options = RopeOptions(base, layout, inv_freq, attention_factor, rotary_dim)
        self.d = v.int_at_least("d", d, 1)
        self.rotary_dim = r = options.rotated_features(self.d, "d")
        if inv_freq is None:
            inv_freq = rope_frequencies(r, base=options.base)
        elif inv_freq.shape != (r // 2,):
            raise ValueError(f"inv_freq must have shape ({r // 2},), got {tuple(inv_freq.shape)}")
        # The frequencies live in a buffer (moved by .to(device)); the options keep the rest.
        self.options = replace(options, inv_freq=None)
        self.register_buffer("inv_freq", inv_freq.float(), persistent=False)
        empty = torch.empty(0, r // 2, device=inv_freq.device)
        self.register_buffer("cos_cached", empty, persistent=False)
        self.register_buffer("sin_cached", empty.clone(), persistent=False)

    @property
    def layout(self) -> str:
        return self.options.layout

    @property
    def attention_factor(self) -> float:
        return self.options.attention_factor

    def reconfigured(self, **changes) -> RotaryEmbedding:
        """A new module like this one with some of ``apply_rope``'s options changed, on this one's device.

        E.g. ``rope.reconfigured(inv_freq=scaled, attention_factor=a)``: the module a model swaps in to
        run under a context-extension method (as transformers re-creates a model's ``rotary_emb``).
        The frequencies stay this module's unless ``inv_freq``, ``base`` or ``rotary_dim`` changes.
        """
        keep = not {"inv_freq", "base", "rotary_dim"} & set(changes)
        options = replace(self.options, **({"inv_freq": self.inv_freq} if keep else {}), **changes)
        kw = {f.name: getattr(options, f.name) for f in fields(options)}
        return RotaryEmbedding(self.d, **kw).to(self.inv_freq.device)

    def _apply(self, fn, recurse: bool = True):
        # Follow device moves, but keep the float32 tables through dtype casts.
        before = {name: b for name, b in self._buffers.items() if b is not None}
        super()._apply(fn, recurse)
        for name, old in before.items():
            new = self._buffers[name]
            if new is not None and new.dtype != old.dtype:
                self._buffers[name] = old.to(device=new.device)
        return self

    def tables(self, seq: int, offset: int = 0) -> tuple[Tensor, Tensor]:
        """cos and sin for positions offset .. offset + seq - 1, each (seq, rotary_dim/2) float32 (cache views)."""
        end = offset + seq
        if end > self.cos_cached.shape[0]:
            # Grow to the next power of two, so decoding token by token rebuilds rarely.
            n = 1 << max(0, end - 1).bit_length()
            angles = rope_angles(n, self.rotary_dim, inv_freq=self.inv_freq, device=self.inv_freq.device)
            self.cos_cached, self.sin_cached = rope_tables(angles, self.attention_factor)
        return self.cos_cached[offset:end], self.sin_cached[offset:end]

    def rotate(self, x: Tensor, positions: Tensor | None = None, offset: int = 0) -> Tensor:
        """R x for one tensor (..., seq, d); see the class docstring for positions and offset."""
        v.last_dim("x", x, self.d)
        if _fused(x, self.inv_freq, self.cos_cached):
            return self._rotate_in_kernel(x, None, positions, offset)[0]
        if positions is None:
            cos, sin = self.tables(x.shape[-2], v.int_at_least("offset", offset, 0))
        else:
            options = replace(self.options, inv_freq=self.inv_freq)
            cos, sin = rope_tables(position_angles(x, positions, options), self.attention_factor)
        return rotate_partial(x, cos, sin, self.options, rotate)

    def _rotate_in_kernel(self, q: Tensor, k: Tensor | None, positions: Tensor | None,
                          offset: int) -> tuple[Tensor, Tensor | None]:
        """q and k in one Triton launch: the cache's rows (positions None), else angles from positions."""
        v.sequence_tensor("q", q)
        if positions is not None:
            positions = sequence_positions(positions, q)
            if k is not None:
                sequence_positions(positions, k)
            return _rope_in_kernel(q, k, positions, self.options, self.inv_freq, self.rotary_dim)
        seq = max(q.shape[-2], 0 if k is None else k.shape[-2])
        cos, sin = self.tables(seq, v.int_at_least("offset", offset, 0))
        return triton_rope.rope(q, k, cos=cos, sin=sin, rotary_dim=self.rotary_dim, layout=self.layout)

    def forward(
        self, q: Tensor, k: Tensor, positions: Tensor | None = None, *, offset: int = 0
    ) -> tuple[Tensor, Tensor]:
        v.last_dim("q", q, self.d)
        v.last_dim("k", k, self.d)
        if _fused(q, self.inv_freq, self.cos_cached) and _fused(k) and (k.dtype, k.device) == (q.dtype, q.device):
            return self._rotate_in_kernel(q, k, positions, offset)
        return self.rotate(q, positions, offset), self.rotate(k, positions, offset)
