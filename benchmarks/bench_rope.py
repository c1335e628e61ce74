"""apply_rope against the one-pass bound and Hugging Face's apply_rotary_pos_emb.

Forward (``run``): the bound for an out-of-place elementwise op on q and k is one
allocating pass each, ``q * c, k * c``. Every candidate rotates both q and k (B=1, H=16,
D=128 by default): the stateless ``apply_rope``, a ``RotaryEmbedding`` module (which may
keep its cos/sin tables between calls, as a model uses it), Hugging Face's function.
Forward + backward (``run_grad``): q requires grad, ``out = apply_rope(q)`` then
``torch.autograd.grad(out, q, g)``, over one allocating pass ``x * c`` on a tensor of q's
shape and dtype (RoPE's backward is itself a rotation, so the ideal is about 2 passes).
Small sizes (``run_small``): the C kernel's rotation over the reference's, on 256 to 65536
elements, the measurement behind ``rotary.SMALL`` (below it ``apply_rope`` keeps the reference).
All candidates of a row are timed round-robin in the same process; a ratio is the median
over rounds of the candidate's time over the bound's (or the reference's) time in the same round.
On a GPU (``run_device``, ``run_device_grad``; ``make bench DEVICE=cuda``): q (1, 32, L, 128) and
k (1, 8, L, 128) as in a GQA model, against a clone and the bound, CUDA events, the median of 25
calls; ``run_triton_shapes`` sweeps the Triton kernel's launch shapes (``--tune``).
Run: python -m benchmarks.bench_rope [--quick] [--no-compile] [--repeats N] [--grad-repeats N]
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
from functools import partial
from typing import Callable

import torch

import posenc_lib as pl
from posenc_lib import rotary
from posenc_lib.rope import RopeOptions, rotate_at_positions

from ._timing import device_samples, first_call_seconds, interleaved_samples, machine, paired_ratios

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
LAYOUTS = ("interleaved", "half")
QUICK_SAMPLE_S = 1e-3  # --quick checks that everything runs; its ratios are not measurements
# Agreement with a reference computed in higher precision: a few float32 ulps; for bfloat16
# one rounding of the output (2**-9 relative) and of any bf16 intermediate.
TOLERANCES = {torch.float32: dict(atol=2e-5, rtol=1e-5), torch.bfloat16: dict(atol=2e-2, rtol=2e-2)}


def rope_grad(q: torch.Tensor, g: torch.Tensor, layout: str, rope=pl.apply_rope) -> torch.Tensor:
    """d<rope(q), g>/dq by autograd, for a q that requires grad (``rope(x, layout=...)``)."""
    return torch.autograd.grad(rope(q, layout=layout), q, g)[0]


def check_grad(q: torch.Tensor, g: torch.Tensor, layout: str, rope=pl.apply_rope) -> None:
    """Raise AssertionError unless ``rope_grad`` equals autograd through the float64 plain form.

    The reference rotates q.double() by the library's angles (``rope_angles``, float32)
    taken to float64 before cos and sin, so it differs from the candidate only by the
    candidate's own rounding.
    """
    L, d = q.shape[-2:]
    angles = pl.rope_angles(L, d).double()
    q64 = q.detach().double().requires_grad_()
    expected = torch.autograd.grad(pl.rotate_pairs(q64, angles.cos(), angles.sin(), layout), q64, g.double())[0]
    got = rope_grad(q, g, layout, rope)
    assert got.dtype == q.dtype and got.shape == q.shape, (got.dtype, got.shape)
    torch.testing.assert_close(got.double(), expected, **TOLERANCES[q.dtype])


def hf_cos_sin(x: torch.Tensor, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin exactly as transformers' LlamaRotaryEmbedding hands them to apply_rotary_pos_emb."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    _, heads, seq, d = x.shape
    cfg = LlamaConfig(hidden_size=heads * d, num_attention_heads=heads, max_position_embeddings=max(seq, 2),
                      rope_parameters={"rope_type": "default", "rope_theta": base})
    rot = LlamaRotaryEmbedding(cfg)
    return rot(x, torch.arange(seq).expand(x.shape[0], -1))


def run(lengths=(1024, 4096, 16384), dtypes=("float32", "bfloat16"), *, heads: int = 16, d: int = 128,
        batch: int = 1, repeats: int = 9, compiled: bool = True, check: bool = True,
        min_sample_s: float = 0.03) -> list[dict]:
    """One row per (dtype, L): median ratios to the bound, and the compiled path's first-call cost."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    g = torch.Generator().manual_seed(0)
    rows = []
    first_call: dict[tuple[str, str], float] = {}
    for name in dtypes:
        dtype = DTYPES[name]
        for L in lengths:
            q = torch.randn(batch, heads, L, d, generator=g).to(dtype)
            k = torch.randn(batch, heads, L, d, generator=g).to(dtype)
            cos, sin = hf_cos_sin(q)
            modules = {layout: pl.RotaryEmbedding(d, layout=layout) for layout in LAYOUTS}
            if check:  # same numbers as the references before any timing
                hq, hk = apply_rotary_pos_emb(q, k, cos, sin)
                # HF builds its frequencies with a different float32 formula (1 ulp apart), so
                # angles at position ~16k differ by ~2e-3 rad: a loose check against HF, a tight
                # one against the plain form, and the module rotates as the function does.
                torch.testing.assert_close(pl.apply_rope(q, layout="half"), hq, atol=2e-2, rtol=2e-2)
                angles = pl.rope_angles(L, d)  # the plain teaching form, in float32
                ref = pl.rotate_pairs(q.float(), angles.cos(), angles.sin()).to(dtype)
                torch.testing.assert_close(pl.apply_rope(q), ref, **TOLERANCES[dtype])
                for layout, rot in modules.items():
                    for got, x in zip(rot(q, k), (q, k)):
                        torch.testing.assert_close(got, pl.apply_rope(x, layout=layout), **TOLERANCES[dtype])
                del hq, hk, ref
            fns = {
                "bound": lambda: (q * 1.5, k * 1.5),
                "interleaved": lambda: (pl.apply_rope(q), pl.apply_rope(k)),
                "half": lambda: (pl.apply_rope(q, layout="half"), pl.apply_rope(k, layout="half")),
                "module_interleaved": lambda: modules["interleaved"](q, k),
                "module_half": lambda: modules["half"](q, k),
                "hf": lambda: apply_rotary_pos_emb(q, k, cos, sin),
            }
            if compiled:
                for layout in LAYOUTS:
                    key = (name, layout)
                    if key not in first_call:
                        first_call[key] = first_call_seconds(lambda: pl.apply_rope_compiled(q, layout=layout))
                    if check:
                        torch.testing.assert_close(pl.apply_rope_compiled(q, layout=layout),
                                                   pl.apply_rope(q, layout=layout), atol=1e-2, rtol=1e-2)
                fns["compiled_interleaved"] = lambda: (pl.apply_rope_compiled(q), pl.apply_rope_compiled(k))
                fns["compiled_half"] = lambda: (pl.apply_rope_compiled(q, layout="half"),
                                                pl.apply_rope_compiled(k, layout="half"))
            samples = interleaved_samples(fns, repeats=repeats, min_sample_s=min_sample_s)
            ratio = paired_ratios(samples, "bound")
            row = {"dtype": name, "L": L, "bound_ms": statistics.median(samples["bound"]) * 1e3}
            row.update({key: r for key, r in ratio.items() if key != "bound"})
            row["hf_over_half"] = paired_ratios(samples, "half")["hf"]
            if compiled:
                row["compile_s_interleaved"] = first_call[(name, "interleaved")]
                row["compile_s_half"] = first_call[(name, "half")]
            rows.append(row)
            del q, k, cos, sin, modules
    return rows


def stateless_tables(L: int, d: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The cos and sin tables a stateless ``apply_rope`` computes for positions 0..L-1 (float32)."""
    angles = pl.rope_angles(L, d)
    return angles.cos(), angles.sin()


def run_grad(lengths=(1024, 4096, 16384), dtypes=("float32", "bfloat16"), *, heads: int = 16, d: int = 128,
             batch: int = 1, repeats: int = 5, check: bool = True, min_sample_s: float = 0.03) -> list[dict]:
    """One row per (dtype, L): forward + backward of apply_rope (each layout) over one pass ``x * c``.

    Every sample repeats its call as often as the bound needs to last ``min_sample_s``: at
    tiny sizes, where autograd's fixed cost makes a call 100x the bound, pass a smaller one.
    """
    g = torch.Generator().manual_seed(1)
    rows = []
    for name in dtypes:
        dtype = DTYPES[name]
        for L in lengths:
            x = torch.randn(batch, heads, L, d, generator=g).to(dtype)
            q = x.clone().requires_grad_()
            grad_out = torch.randn(batch, heads, L, d, generator=g).to(dtype)
            if check:
                for layout in LAYOUTS:
                    check_grad(q, grad_out, layout)
            module = pl.RotaryEmbedding(d)  # its cos/sin cache: what a model's backward pass sees
            samples = interleaved_samples({
                "bound": lambda: x * 1.5,
                # The same memory traffic as an ideal forward + backward: one pass over q, one over g.
                "two_passes": lambda: (x * 1.5, grad_out * 1.5),
                # What no stateless forward + backward can avoid: those two passes, and the float32
                # cos/sin tables it must compute on every call (apply_rope's, for positions 0..L-1).
                "floor": lambda: (x * 1.5, grad_out * 1.5, stateless_tables(L, d)),
                "interleaved": lambda: rope_grad(q, grad_out, "interleaved"),
                "half": lambda: rope_grad(q, grad_out, "half"),
                "module": lambda: torch.autograd.grad(module.rotate(q), q, grad_out),
            }, repeats=repeats, min_sample_s=min_sample_s)
            ratio = paired_ratios(samples, "bound")
            rows.append({"dtype": name, "L": L, "bound_ms": statistics.median(samples["bound"]) * 1e3,
                         **{k: ratio[k] for k in ("two_passes", "floor", "interleaved", "half", "module")},
                         "interleaved_over_floor": paired_ratios(samples, "floor")["interleaved"],
                         "module_over_two_passes": paired_ratios(samples, "two_passes")["module"]})
            del x, q, grad_out, module
    return rows


SMALL_SIZES = tuple(2**k for k in range(8, 17))  # 256 .. 65536 elements


def run_small(sizes=SMALL_SIZES, dtypes=("float32", "bfloat16"), *, heads: int = 4, d: int = 64,
              repeats: int = 5, min_sample_s: float = 0.02) -> list[dict]:
    """Where the C kernel pays off: its rotation's time over the reference's on small tensors.

    x: (heads, size / (heads d), d) with its (seq, d/2) cos/sin tables given, so only the rotation
    is timed: ``kernels.cpu.rope_rotate`` against ``rope.rotate_in_float32`` (what ``rotary.rotate``
    runs below ``rotary.SMALL`` elements), forward and forward + backward, each layout, in the same
    rounds. One row per (dtype, size); [] where the kernel is not built (or POSENC_CPU_KERNEL=0).
    """
    from posenc_lib.kernels import cpu
    from posenc_lib.rope import rotate_in_float32

    if not cpu.available():
        return []
    g = torch.Generator().manual_seed(3)
    rows = []
    for name in dtypes:
        for size in sizes:
            seq = max(1, size // (heads * d))
            x = torch.randn(heads, seq, d, generator=g).to(DTYPES[name])
            q, grad_out = x.clone().requires_grad_(), torch.randn(x.shape, generator=g).to(x.dtype)
            angles = pl.rope_angles(seq, d)
            cos, sin = angles.cos(), angles.sin()
            fns = {}
            for layout in LAYOUTS:
                inter = layout == "interleaved"
                fns[f"ref_{layout}"] = partial(rotate_in_float32, x, cos, sin, layout)
                fns[f"kernel_{layout}"] = partial(cpu.rope_rotate, x, cos, sin, inter, False)
                fns[f"ref_grad_{layout}"] = partial(_grad, lambda t, lay=layout: rotate_in_float32(t, cos, sin, lay),
                                                    q, grad_out)
                fns[f"kernel_grad_{layout}"] = partial(_grad, lambda t, i=inter: cpu.rope_rotate(t, cos, sin, i, False),
                                                       q, grad_out)
                if not torch.equal(fns[f"kernel_{layout}"](), fns[f"ref_{layout}"]()):
                    raise AssertionError(f"the kernel's bits differ from the reference ({name}, {size}, {layout})")
            samples = interleaved_samples(fns, repeats=repeats, min_sample_s=min_sample_s)
            row = {"dtype": name, "size": heads * seq * d, "ref_us": statistics.median(samples["ref_interleaved"]) * 1e6}
            for layout in LAYOUTS:
                row[f"fwd_{layout}"] = paired_ratios(samples, f"ref_{layout}")[f"kernel_{layout}"]
                row[f"grad_{layout}"] = paired_ratios(samples, f"ref_grad_{layout}")[f"kernel_grad_{layout}"]
            rows.append(row)
    return rows


def _grad(rope, q: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    return torch.autograd.grad(rope(q), q, g)[0]


def table_small(rows: list[dict]) -> str:
    """Markdown table of the rows from ``run_small``."""
    lines = ["| dtype | elements | reference, interleaved (us) | kernel / reference, interleaved | half "
             "| fwd+bwd interleaved | fwd+bwd half |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['dtype']} | {r['size']} | {r['ref_us']:.1f} | {r['fwd_interleaved']:.2f}x | {r['fwd_half']:.2f}x "
              f"| {r['grad_interleaved']:.2f}x | {r['grad_half']:.2f}x |" for r in rows]
    return "\n".join(lines)


SMALL_CAPTION = (
    "Where the C kernel pays off: time of its rotation (`kernels.cpu.rope_rotate`) over the reference's "
    "(`rope.rotate_in_float32`, what `apply_rope` runs below `rotary.SMALL` = {small} elements) on x of "
    "(4, seq, 64), tables given, forward and forward + backward. Median over {n} rounds of the paired ratio; "
    "below 1 the kernel is faster")


def table(rows: list[dict]) -> str:
    """Markdown table of the rows from ``run``."""
    comp = "compiled_interleaved" in rows[0]
    head = ("| dtype | L | bound (ms) | interleaved / bound | half / bound | module interleaved / bound "
            "| module half / bound | HF / bound | HF / half |")
    sep = "|---|---|---|---|---|---|---|---|---|"
    if comp:
        head += " compiled interleaved / bound | compiled half / bound |"
        sep += "---|---|"
    lines = [head, sep]
    for r in rows:
        line = (f"| {r['dtype']} | {r['L']} | {r['bound_ms']:.1f} | {r['interleaved']:.2f}x | {r['half']:.2f}x | "
                f"{r['module_interleaved']:.2f}x | {r['module_half']:.2f}x | {r['hf']:.2f}x | "
                f"{r['hf_over_half']:.2f}x |")
        if comp:
            line += f" {r['compiled_interleaved']:.2f}x | {r['compiled_half']:.2f}x |"
        lines.append(line)
    if comp:
        firsts = sorted({(r["dtype"], r["compile_s_interleaved"], r["compile_s_half"]) for r in rows})
        seen = set()
        for dt, ci, ch in firsts:
            if dt in seen:
                continue
            seen.add(dt)
            lines.append(f"\nCompiled path, first call ({dt}): interleaved {ci:.1f} s, half {ch:.1f} s.")
    return "\n".join(lines)


def table_grad(rows: list[dict]) -> str:
    """Markdown table of the rows from ``run_grad``."""
    lines = ["| dtype | L | bound (ms) | two passes / bound | floor / bound | interleaved fwd+bwd / bound "
             "| half fwd+bwd / bound | module fwd+bwd / bound | interleaved / floor | module / two passes |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['dtype']} | {r['L']} | {r['bound_ms']:.2f} | {r['two_passes']:.2f}x | {r['floor']:.2f}x | "
              f"{r['interleaved']:.2f}x | {r['half']:.2f}x | {r['module']:.2f}x | {r['interleaved_over_floor']:.2f}x | "
              f"{r['module_over_two_passes']:.2f}x |" for r in rows]
    return "\n".join(lines)


FORWARD_CAPTION = (
    "RoPE forward: time / one-pass bound (`q * 1.5, k * 1.5`, each allocating), B=1, H=16, D=128; "
    "every candidate rotates q and k: `apply_rope` (stateless), a `RotaryEmbedding` module called "
    "as `rope(q, k)`, Hugging Face's `apply_rotary_pos_emb`. Median over {n} rounds of the time over "
    "the bound's time in the same round")
GRAD_CAPTION = (
    "RoPE forward + backward: time of `out = apply_rope(q, layout=...)` then `torch.autograd.grad(out, q, g)` "
    "(q requires grad, g fixed) / one-pass bound (one allocating `x * 1.5`, x of q's shape and dtype, "
    "no autograd), B=1, H=16, D=128; goal <= 2.5x. Also: two passes (`x * 1.5` then `g * 1.5`, the memory "
    "traffic of an ideal forward + backward), the floor of a stateless call (those two passes plus the float32 "
    "cos/sin tables for L positions, which `apply_rope` must compute on every call), and a `RotaryEmbedding` "
    "(cached cos/sin, so its floor is the two passes) in place of `apply_rope`. "
    "Median over {n} rounds of the time over the bound's time in the same round; gradients checked against "
    "autograd through the float64 plain form first")


# ---------------------------------------------------------------- on a GPU (--device cuda)

@contextlib.contextmanager
def without_triton():
    """rotary as it is where Triton is missing (the torch paths): the 'before' rows."""
    saved = rotary.triton_rope
    rotary.triton_rope = None
    try:
        yield
    finally:
        rotary.triton_rope = saved


def _untriton(f):
    def call():
        with without_triton():
            return f()
    return call


def _hf_rope(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    return apply_rotary_pos_emb(q, k, cos, sin)


def device_candidates(q: torch.Tensor, k: torch.Tensor, *, compiled: bool = True) -> dict[str, Callable]:
    """What the GPU tables time, each rotating q and k (half layout, as transformers): name -> call."""
    rot = pl.RotaryEmbedding(q.shape[-1], layout="half").to(q.device)
    rot(q, k)  # fills the cache
    cos, sin = (t.to(q.device) for t in hf_cos_sin(torch.empty(1, 1, *q.shape[-2:], dtype=q.dtype)))
    fns = {
        "clone": lambda: (q.clone(), k.clone()),
        "bound": lambda: (q * 1.5, k * 1.5),
        "apply_rope": lambda: (pl.apply_rope(q, layout="half"), pl.apply_rope(k, layout="half")),
        "module": lambda: rot(q, k),
        "apply_rope torch": _untriton(lambda: (pl.apply_rope(q, layout="half"), pl.apply_rope(k, layout="half"))),
        "module torch": _untriton(lambda: rot(q, k)),
        "hf": lambda: _hf_rope(q, k, cos, sin),
    }
    if rotary.triton_rope is not None:  # both angle sources, each one launch for q and k
        cos_t, sin_t = rot.tables(q.shape[-2])
        fns["triton tables"] = lambda: rotary.triton_rope.rope(q, k, cos=cos_t, sin=sin_t, layout="half")
        fns["triton registers"] = lambda: rotary.triton_rope.rope(q, k, inv_freq=rot.inv_freq, layout="half")
    if compiled:
        hf_compiled = torch.compile(_hf_rope)
        fns["apply_rope_compiled"] = lambda: (pl.apply_rope_compiled(q, layout="half"),
                                              pl.apply_rope_compiled(k, layout="half"))
        fns["hf compiled"] = lambda: hf_compiled(q, k, cos, sin)
    return fns


DEVICE_COLUMNS = ("clone", "apply_rope", "module", "triton tables", "triton registers", "apply_rope torch",
                  "module torch", "apply_rope_compiled", "hf", "hf compiled")


def check_device(q: torch.Tensor, k: torch.Tensor, fns: dict[str, Callable]) -> None:
    """Every RoPE candidate gives the CPU reference's numbers (HF's frequencies are 1 ulp off: looser)."""
    want = [rotate_at_positions(x.cpu(), None, RopeOptions(layout="half")) for x in (q, k)]
    tol = TOLERANCES[q.dtype]
    for name, f in fns.items():
        if name in ("clone", "bound"):
            continue
        for got, w in zip(f(), want):
            loose = dict(atol=2e-2, rtol=2e-2) if name.startswith("hf") else tol
            torch.testing.assert_close(got.cpu(), w, **loose, msg=lambda m, n=name: f"{n}: {m}")


def run_device(device: str, lengths=(4096, 16384), dtypes=("bfloat16", "float32"), *, heads_q: int = 32,
               heads_k: int = 8, d: int = 128, repeats: int = 25, compiled: bool = True, check: bool = True,
               min_sample_s: float = 0.03) -> list[dict]:
    """RoPE forward on ``device``: q (1, heads_q, L, d) and k (1, heads_k, L, d); median time of each
    candidate over the bound's (``q * 1.5, k * 1.5``), CUDA events, ``repeats`` calls each
    (``min_sample_s``: a CPU sample's length, ``device_samples``)."""
    g = torch.Generator().manual_seed(0)
    rows = []
    for name in dtypes:
        for L in lengths:
            q = torch.randn(1, heads_q, L, d, generator=g).to(DTYPES[name]).to(device)
            k = torch.randn(1, heads_k, L, d, generator=g).to(DTYPES[name]).to(device)
            fns = device_candidates(q, k, compiled=compiled)
            if check:
                check_device(q, k, fns)
            samples = device_samples(fns, device, repeats=repeats, min_sample_s=min_sample_s)
            med = {n: statistics.median(t) for n, t in samples.items()}
            rows.append({"dtype": name, "L": L, "bound_ms": med["bound"] * 1e3,
                         **{n: med[n] / med["bound"] for n in fns if n != "bound"}})
            del q, k, fns
    return rows


def run_device_grad(device: str, lengths=(4096, 16384), dtypes=("bfloat16", "float32"), *, heads_q: int = 32,
                    heads_k: int = 8, d: int = 128, repeats: int = 25, min_sample_s: float = 0.03) -> list[dict]:
    """RoPE forward + backward on ``device`` (q and k require grad, fixed output gradients) over two clone
    passes (q, k, then the two gradients: the traffic of an ideal forward + backward)."""
    g = torch.Generator().manual_seed(1)
    rows = []
    for name in dtypes:
        for L in lengths:
            dt = DTYPES[name]
            q, k, gq, gk = (torch.randn(1, h, L, d, generator=g).to(dt).to(device)
                            for h in (heads_q, heads_k, heads_q, heads_k))
            q.requires_grad_()
            k.requires_grad_()
            rot = pl.RotaryEmbedding(d, layout="half").to(device)
            cos, sin = (t.to(device) for t in hf_cos_sin(torch.empty(1, 1, L, d, dtype=dt)))

            def fwd_bwd(rope):
                return lambda: torch.autograd.grad(rope(), (q, k), (gq, gk))

            both = lambda: (pl.apply_rope(q, layout="half"), pl.apply_rope(k, layout="half"))  # noqa: E731
            fns = {
                "two clones": lambda: (q.detach().clone(), k.detach().clone(), gq.clone(), gk.clone()),
                "apply_rope": fwd_bwd(both),
                "module": fwd_bwd(lambda: rot(q, k)),
                "apply_rope torch": _untriton(fwd_bwd(both)),
                "module torch": _untriton(fwd_bwd(lambda: rot(q, k))),
                "hf": fwd_bwd(lambda: _hf_rope(q, k, cos, sin)),
            }
            samples = device_samples(fns, device, repeats=repeats, min_sample_s=min_sample_s)
            med = {n: statistics.median(t) for n, t in samples.items()}
            rows.append({"dtype": name, "L": L, "two_clones_ms": med["two clones"] * 1e3,
                         **{n: med[n] / med["two clones"] for n in fns if n != "two clones"}})
            del q, k, gq, gk, rot
    return rows


def run_triton_shapes(device: str, L: int = 16384, dtype: str = "bfloat16", *, heads_q: int = 32, heads_k: int = 8,
                      d: int = 128, block_s=(4, 8, 16), groups=(1, 4), num_warps=(2, 4), repeats: int = 25,
                      min_sample_s: float = 0.03) -> list[dict]:
    """The Triton kernel's launch shapes (``triton_rope.launch_shape``'s choices), each angle source, over
    a clone of q and k: what to tune on a new GPU. [] without Triton."""
    tr = rotary.triton_rope
    if tr is None:
        return []
    g = torch.Generator().manual_seed(2)
    q = torch.randn(1, heads_q, L, d, generator=g).to(DTYPES[dtype]).to(device)
    k = torch.randn(1, heads_k, L, d, generator=g).to(DTYPES[dtype]).to(device)
    rot = pl.RotaryEmbedding(d, layout="half").to(device)
    cos, sin = rot.tables(L)
    fns = {"clone": lambda: (q.clone(), k.clone())}
    for bs in block_s:
        for gr in groups:
            for nw in num_warps:
                shape = dict(block_s=bs, groups=gr, num_warps=nw, layout="half")
                fns[("tables", bs, gr, nw)] = lambda s=shape: tr.rope(q, k, cos=cos, sin=sin, **s)
                fns[("registers", bs, gr, nw)] = lambda s=shape: tr.rope(q, k, inv_freq=rot.inv_freq, **s)
    med = {n: statistics.median(t) for n, t in device_samples(fns, device, repeats=repeats,
                                                              min_sample_s=min_sample_s).items()}
    return [{"source": n[0], "block_s": n[1], "groups": n[2], "num_warps": n[3], "over_clone": med[n] / med["clone"]}
            for n in fns if n != "clone"]


def table_device(rows: list[dict]) -> str:
    """Markdown table of ``run_device``'s rows: each candidate as a multiple of the bound."""
    cols = [c for c in DEVICE_COLUMNS if c in rows[0]]
    lines = ["| dtype | L | bound (ms) | " + " | ".join(f"`{c}`" if " " not in c else c for c in cols) + " |",
             "|---|---|---|" + "---|" * len(cols)]
    lines += [f"| {r['dtype']} | {r['L']} | {r['bound_ms']:.3f} | " + " | ".join(f"{r[c]:.2f}" for c in cols) + " |"
              for r in rows]
    return "\n".join(lines)


def table_device_grad(rows: list[dict]) -> str:
    cols = [c for c in ("apply_rope", "module", "apply_rope torch", "module torch", "hf") if c in rows[0]]
    lines = ["| dtype | L | two clones (ms) | " + " | ".join(cols) + " |", "|---|---|---|" + "---|" * len(cols)]
    lines += [f"| {r['dtype']} | {r['L']} | {r['two_clones_ms']:.3f} | " + " | ".join(f"{r[c]:.2f}" for c in cols)
              + " |" for r in rows]
    return "\n".join(lines)


def table_triton_shapes(rows: list[dict]) -> str:
    lines = ["| angles | block_s | groups | num_warps | time / clone |", "|---|---|---|---|---|"]
    lines += [f"| {r['source']} | {r['block_s']} | {r['groups']} | {r['num_warps']} | {r['over_clone']:.2f} |"
              for r in sorted(rows, key=lambda r: (r["source"], r["over_clone"]))]
    return "\n".join(lines)


DEVICE_CAPTION = (
    "RoPE forward on {device}: time / bound (`q * 1.5, k * 1.5`, one allocating pass each), q (1, {hq}, L, {d}) "
    "and k (1, {hk}, L, {d}), half layout; every candidate rotates both. `apply_rope` (stateless: on CUDA with "
    "Triton, angles computed in the kernel, one launch per tensor), `module` (`RotaryEmbedding(q, k)`: one launch "
    "reading its cos/sin cache), the Triton kernel called directly with each angle source (q and k in one launch), "
    "the same public calls without Triton (`torch`: the paths before the kernel), `apply_rope_compiled`, Hugging "
    "Face's `apply_rotary_pos_emb` eager and under `torch.compile`. Median of {n} calls each (CUDA events), "
    "candidates round-robin; every result checked against the CPU reference first")
DEVICE_GRAD_CAPTION = (
    "RoPE forward + backward on {device}: `torch.autograd.grad` of q's and k's rotations (fixed output "
    "gradients) / two clone passes (q and k, then their gradients: the traffic an ideal forward + backward "
    "moves), shapes as above. Median of {n} calls each (CUDA events)")
TRITON_SHAPES_CAPTION = (
    "The Triton kernel's launch shapes at L = {L}, {dtype}: positions per program (block_s), head groups "
    "(programs per position block), warps; time / clone of q and k. Median of {n} calls each")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--repeats", type=int, default=9, help="rounds of the forward rows")
    p.add_argument("--grad-repeats", type=int, default=5, help="rounds of the forward + backward rows")
    p.add_argument("--only", nargs="*", default=["forward", "grad", "small"], choices=["forward", "grad", "small"])
    a = p.parse_args(argv)
    lengths, min_sample_s = ((256,), QUICK_SAMPLE_S) if a.quick else ((1024, 4096, 16384), 0.03)
    print(machine())
    if "forward" in a.only:
        print(f"\n{FORWARD_CAPTION.format(n=a.repeats)}\n")
        print(table(run(lengths, repeats=a.repeats, compiled=not a.no_compile, min_sample_s=min_sample_s)), flush=True)
    if "grad" in a.only:
        print(f"\n{GRAD_CAPTION.format(n=a.grad_repeats)}\n")
        print(table_grad(run_grad(lengths, repeats=a.grad_repeats, min_sample_s=min_sample_s)), flush=True)
    if "small" in a.only:
        from posenc_lib.rotary import SMALL

        print(f"\n{SMALL_CAPTION.format(small=SMALL, n=a.grad_repeats)}\n")
        sizes = SMALL_SIZES[::4] if a.quick else SMALL_SIZES
        print(table_small(run_small(sizes, repeats=a.grad_repeats, min_sample_s=min_sample_s)), flush=True)
    print(machine())


if __name__ == "__main__":
    main()
