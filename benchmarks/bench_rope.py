"""apply_rope against the one-pass bound and Hugging Face's apply_rotary_pos_emb.

The bound for an out-of-place elementwise op on q and k is one allocating pass each:
``q * c, k * c``. Every candidate rotates both q and k (B=1, H=16, D=128 by default), and
all are timed round-robin in the same process; ratios are medians over the bound's median.
Run: python -m benchmarks.bench_rope [--quick]
"""
from __future__ import annotations

import argparse
import statistics

import torch

import posenc_lib as pl

from ._timing import first_call_seconds, interleaved_samples, machine, paired_ratios

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


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
        batch: int = 1, repeats: int = 9, compiled: bool = True, check: bool = True) -> list[dict]:
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
            if check:  # same numbers as the references before any timing
                hq, hk = apply_rotary_pos_emb(q, k, cos, sin)
                tol = dict(atol=2e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=2e-2, rtol=2e-2)
                # HF builds its frequencies with a different float32 formula (1 ulp apart), so
                # angles at position ~16k differ by ~2e-3 rad: a loose check against HF, a tight
                # one against the plain form.
                torch.testing.assert_close(pl.apply_rope(q, layout="half"), hq, atol=2e-2, rtol=2e-2)
                angles = pl.rope_angles(L, d)  # the plain teaching form, in float32
                ref = pl.rotate_pairs(q.float(), angles.cos(), angles.sin()).to(dtype)
                torch.testing.assert_close(pl.apply_rope(q), ref, **tol)
                del hq, hk, ref
            fns = {
                "bound": lambda: (q * 1.5, k * 1.5),
                "interleaved": lambda: (pl.apply_rope(q), pl.apply_rope(k)),
                "half": lambda: (pl.apply_rope(q, layout="half"), pl.apply_rope(k, layout="half")),
                "hf": lambda: apply_rotary_pos_emb(q, k, cos, sin),
            }
            if compiled:
                for layout in ("interleaved", "half"):
                    key = (name, layout)
                    if key not in first_call:
                        first_call[key] = first_call_seconds(lambda: pl.apply_rope_compiled(q, layout=layout))
                    if check:
                        torch.testing.assert_close(pl.apply_rope_compiled(q, layout=layout),
                                                   pl.apply_rope(q, layout=layout), atol=1e-2, rtol=1e-2)
                fns["compiled_interleaved"] = lambda: (pl.apply_rope_compiled(q), pl.apply_rope_compiled(k))
                fns["compiled_half"] = lambda: (pl.apply_rope_compiled(q, layout="half"),
                                                pl.apply_rope_compiled(k, layout="half"))
            samples = interleaved_samples(fns, repeats=repeats)
            ratio = paired_ratios(samples, "bound")
            row = {"dtype": name, "L": L, "bound_ms": statistics.median(samples["bound"]) * 1e3}
            row.update({key: r for key, r in ratio.items() if key != "bound"})
            row["hf_over_half"] = paired_ratios(samples, "half")["hf"]
            if compiled:
                row["compile_s_interleaved"] = first_call[(name, "interleaved")]
                row["compile_s_half"] = first_call[(name, "half")]
            rows.append(row)
            del q, k, cos, sin
    return rows


def table(rows: list[dict]) -> str:
    """Markdown table of the rows from ``run``."""
    comp = "compiled_interleaved" in rows[0]
    head = "| dtype | L | bound (ms) | interleaved / bound | half / bound | HF / bound | HF / half |"
    sep = "|---|---|---|---|---|---|---|"
    if comp:
        head += " compiled interleaved / bound | compiled half / bound |"
        sep += "---|---|"
    lines = [head, sep]
    for r in rows:
        line = (f"| {r['dtype']} | {r['L']} | {r['bound_ms']:.1f} | {r['interleaved']:.2f}x | {r['half']:.2f}x | "
                f"{r['hf']:.2f}x | {r['hf_over_half']:.2f}x |")
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


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("--repeats", type=int, default=9)
    a = p.parse_args(argv)
    lengths = (256,) if a.quick else (1024, 4096, 16384)
    print(machine())
    print(table(run(lengths, repeats=a.repeats, compiled=not a.no_compile)))


if __name__ == "__main__":
    main()
