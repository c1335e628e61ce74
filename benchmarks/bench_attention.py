"""Biased attention without the (H, L, L) bias, against SDPA without a bias.

* time: alibi_attention (causal, symmetric) and t5_attention against
  ``scaled_dot_product_attention`` on the same shapes with no bias (causal: with
  ``is_causal=True``), timed round-robin; ratios of medians.
* memory: peak RSS (VmHWM) of alibi_attention in a fresh subprocess at L = 32768, H = 8,
  D = 64, minus the RSS once q, k, v exist (tracemalloc does not see torch's allocations).
* correctness: equal to the dense reference ``attention(q, k, v, bias=alibi_bias(...))``.
On a GPU (``run_device``, ``make bench DEVICE=cuda``): (1, 16, L, 128) bfloat16 against causal
SDPA (flash) and FlexAttention's plain causal mask, with peak memory from CUDA's allocator.
Run: python -m benchmarks.bench_attention [--quick | --full]
"""
from __future__ import annotations

import argparse
import statistics

import torch
import torch.nn.functional as F

import posenc_lib as pl

from ._timing import device_samples, interleaved_medians, machine, peak_bytes, run_in_subprocess

MEMORY_CODE = """
import json, resource, torch  # resource: page size
import posenc_lib as pl
torch.manual_seed(0)
B, H, L, D = 1, {heads}, {L}, {d}
q, k, v = (torch.randn(B, H, L, D) for _ in range(3))
def rss_mb():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize() / 2**20
base = rss_mb()
out = pl.alibi_attention(q, k, v, mode="{mode}")
# VmHWM (peak RSS of this address space), not ru_maxrss: getrusage keeps the parent's
# high-water mark across fork + exec, so a big parent would hide the child's peak.
with open("/proc/self/status") as fh:
    peak = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM")) / 1024
print(json.dumps({{"base_mb": base, "peak_mb": peak, "extra_mb": peak - base, "finite": bool(out.isfinite().all())}}))
"""


def check(L: int = 48, heads: int = 4, d: int = 16) -> None:
    """The fast forms equal the dense references (1e-5) at a small L."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, heads, L, d, generator=g) for _ in range(3))
    for mode in ("causal", "symmetric"):
        ref = pl.attention(q, k, v, bias=pl.alibi_bias(heads, L, mode=mode))[0]
        torch.testing.assert_close(pl.alibi_attention(q, k, v, mode=mode, chunk_size=7), ref, atol=1e-5, rtol=1e-5)
    t5 = pl.T5RelativeBias(heads, num_buckets=8, max_distance=20)
    ref = pl.attention(q, k, v, bias=t5(L))[0]
    with torch.no_grad():
        torch.testing.assert_close(pl.t5_attention(q, k, v, t5, chunk_size=5), ref, atol=1e-5, rtol=1e-5)


def time_ratios(L: int = 16384, *, heads: int = 8, d: int = 64, repeats: int = 1) -> dict:
    """Median time of each biased form over SDPA without a bias (same shapes)."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, heads, L, d, generator=g) for _ in range(3))
    t5 = pl.T5RelativeBias(heads)
    sdpa = F.scaled_dot_product_attention
    with torch.no_grad():
        med = interleaved_medians({
            "sdpa_causal": lambda: sdpa(q, k, v, is_causal=True),
            "alibi_causal": lambda: pl.alibi_attention(q, k, v, mode="causal"),
            "sdpa": lambda: sdpa(q, k, v),
            "alibi_symmetric": lambda: pl.alibi_attention(q, k, v, mode="symmetric"),
            "t5": lambda: pl.t5_attention(q, k, v, t5),
        }, repeats=repeats, warmup=0)
    return {
        "L": L, "sdpa_s": med["sdpa"], "sdpa_causal_s": med["sdpa_causal"],
        "alibi_causal": med["alibi_causal"] / med["sdpa_causal"],
        "alibi_symmetric": med["alibi_symmetric"] / med["sdpa"],
        "t5": med["t5"] / med["sdpa"],
    }


def peak_memory(L: int = 32768, *, heads: int = 8, d: int = 64, mode: str = "causal") -> dict:
    """Extra peak RSS (MB) of alibi_attention at (1, heads, L, d), in a fresh interpreter."""
    res = run_in_subprocess(MEMORY_CODE.format(heads=heads, L=L, d=d, mode=mode), timeout=1800)
    res.update(L=L, heads=heads, mode=mode, dense_bias_mb=heads * L * L * 4 / 2**20)
    return res


def table(t: dict, mem: dict | None) -> str:
    lines = [
        f"| attention at L={t['L']}, H=8, D=64 | time / SDPA without bias |",
        "|---|---|",
        f"| alibi_attention causal (vs SDPA is_causal=True, {t['sdpa_causal_s']:.1f} s) | {t['alibi_causal']:.2f}x |",
        f"| alibi_attention symmetric (vs SDPA, {t['sdpa_s']:.1f} s) | {t['alibi_symmetric']:.2f}x |",
        f"| t5_attention bidirectional (vs SDPA) | {t['t5']:.2f}x |",
    ]
    if mem is not None:
        lines.append(f"\nPeak extra memory of alibi_attention ({mem['mode']}) at L={mem['L']}, H={mem['heads']}, D=64: "
                     f"{mem['extra_mb']:.0f} MB (the dense (H, L, L) float32 bias alone: {mem['dense_bias_mb']:.0f} MB).")
    return "\n".join(lines)


# ---------------------------------------------------------------- on a GPU (--device cuda)

def run_device(device: str, lengths=(4096, 16384), *, heads: int = 16, d: int = 128, dtype=torch.bfloat16,
               repeats: int = 25, dense_up_to: int = 4096, grad: bool = True, min_sample_s: float = 0.03) -> list[dict]:
    """Causal attention with a position bias on ``device``, (1, heads, L, d): median time and peak extra
    memory of each form over causal SDPA's (flash on a GPU): FlexAttention with the causal block mask and no
    bias (the control: what the bias costs on top), ``alibi_attention``, ``t5_attention`` (causal), SDPA
    with the dense (H, L, L) ALiBi bias (up to ``dense_up_to``); then forward + backward of SDPA, FlexAttention
    causal and ``alibi_attention``. CUDA events, ``repeats`` calls each, round-robin."""
    from posenc_lib.kernels import flex

    sdpa = F.scaled_dot_product_attention
    g = torch.Generator().manual_seed(0)
    rows = []
    for L in lengths:
        q, k, v = (torch.randn(1, heads, L, d, generator=g).to(dtype).to(device) for _ in range(3))
        t5 = pl.T5RelativeBias(heads, bidirectional=False).to(device)
        fns = {
            "sdpa causal": lambda: sdpa(q, k, v, is_causal=True),
            "flex causal": lambda: flex.causal_attention(q, k, v),
            "alibi_attention": lambda: pl.alibi_attention(q, k, v),
            "t5_attention": lambda: pl.t5_attention(q, k, v, t5),
        }
        if L <= dense_up_to:
            bias = pl.alibi_bias(heads, L, device=device, dtype=dtype)
            fns["sdpa dense bias"] = lambda: sdpa(q, k, v, attn_mask=bias)
        with torch.no_grad():
            med = {n: statistics.median(t) for n, t in device_samples(fns, device, repeats=repeats,
                                                                      min_sample_s=min_sample_s).items()}
            mem = {n: peak_bytes(f, device) for n, f in fns.items()}
        row = {"L": L, "sdpa_ms": med["sdpa causal"] * 1e3, **{n: med[n] / med["sdpa causal"] for n in fns},
               **{f"{n} MiB": (m / 2**20 if m is not None else None) for n, m in mem.items()}}
        if grad:
            qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
            out_grad = torch.randn(q.shape, generator=g).to(dtype).to(device)

            def fwd_bwd(fn):
                return lambda: torch.autograd.grad(fn(qg, kg, vg), (qg, kg, vg), out_grad)

            gfns = {"sdpa causal": fwd_bwd(lambda a, b, c: sdpa(a, b, c, is_causal=True)),
                    "flex causal": fwd_bwd(flex.causal_attention),
                    "alibi_attention": fwd_bwd(pl.alibi_attention)}
            gmed = {n: statistics.median(t) for n, t in device_samples(gfns, device, repeats=repeats,
                                                                       min_sample_s=min_sample_s).items()}
            row.update({f"{n} fwd+bwd": gmed[n] / gmed["sdpa causal"] for n in gfns})
        rows.append(row)
        del q, k, v, t5, fns
    return rows


def table_device(rows: list[dict]) -> str:
    names = ("flex causal", "alibi_attention", "t5_attention", "sdpa dense bias")
    lines = ["| L | SDPA causal (ms) | " + " | ".join(f"{n} / SDPA" for n in names) + " | peak MiB: SDPA | "
             + " | ".join(names) + " | fwd+bwd / SDPA's: flex causal | alibi_attention |",
             "|---|---|" + "---|" * (2 * len(names) + 3)]
    for r in rows:
        cells = [f"{r[n]:.2f}x" if n in r else "—" for n in names]
        mib = [f"{r[n + ' MiB']:.0f}" if r.get(n + " MiB") is not None else "—" for n in ("sdpa causal", *names)]
        grads = [f"{r[n + ' fwd+bwd']:.2f}x" if n + " fwd+bwd" in r else "—" for n in ("flex causal", "alibi_attention")]
        lines.append(f"| {r['L']} | {r['sdpa_ms']:.3f} | " + " | ".join(cells + mib + grads) + " |")
    return "\n".join(lines)


DEVICE_CAPTION = (
    "Causal attention with a position bias on {device}, (1, {heads}, L, {d}) {dtype}: time and peak extra memory "
    "over causal SDPA's; FlexAttention with the causal block mask and no bias is the control (what the bias "
    "adds on top). Median of {n} calls each (CUDA events)")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--quick", action="store_true", help="tiny sizes (smoke run)")
    p.add_argument("--full", action="store_true", help="the issue's sizes: time at L=16384, memory at L=32768")
    a = p.parse_args(argv)
    check()
    if a.quick:
        t, mem = time_ratios(256, repeats=1), peak_memory(512)
    elif a.full:
        t, mem = time_ratios(16384, repeats=1), peak_memory(32768)
    else:
        t, mem = time_ratios(4096, repeats=3), peak_memory(8192)
    print(machine())
    print(table(t, mem))


if __name__ == "__main__":
    main()
