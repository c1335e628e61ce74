"""Run every benchmark and print one markdown report of ratios (``make bench``).

python -m benchmarks.run_all            # default: fits in ~5 minutes on an idle 2-core CPU
python -m benchmarks.run_all --full     # the issue's sizes for attention (L=16384 time, L=32768 memory)
python -m benchmarks.run_all --compile  # also the torch.compile RoPE path (first call compiles)
python -m benchmarks.run_all --only rope attention widgets
python -m benchmarks.run_all --device cuda          # the GPU tables (make bench DEVICE=cuda); --full adds
                                                    # L = 65536 for RoPE and 32768 for attention, --tune the
                                                    # Triton kernel's launch shapes
"""
from __future__ import annotations

import argparse
import time

from . import bench_attention, bench_rope, bench_widgets
from ._timing import machine


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--full", action="store_true", help="attention at the issue's sizes (slow: minutes)")
    p.add_argument("--compile", action="store_true", help="include apply_rope_compiled (compiles on first call)")
    p.add_argument("--quick", action="store_true", help="tiny sizes: checks that everything runs")
    p.add_argument("--only", nargs="*", default=["rope", "attention", "widgets"])
    p.add_argument("--device", default="cpu", help="cpu (the tables below) or cuda (the GPU tables)")
    p.add_argument("--tune", action="store_true", help="on a GPU: also sweep the Triton kernel's launch shapes")
    a = p.parse_args(argv)
    t0 = time.perf_counter()
    print(f"## posenc benchmarks\n\nMachine: {machine(a.device)}\n")
    if a.device != "cpu":
        device_tables(a)
        print(f"(total {time.perf_counter() - t0:.0f} s)")
        return
    if "rope" in a.only:
        lengths = (256,) if a.quick else (1024, 4096, 16384)
        repeats, grad_repeats, sample_s = (2, 2, bench_rope.QUICK_SAMPLE_S) if a.quick else (9, 5, 0.03)
        print(f"### {bench_rope.FORWARD_CAPTION.format(n=repeats)}\n")
        rows = bench_rope.run(lengths, repeats=repeats, compiled=a.compile, min_sample_s=sample_s)
        print(bench_rope.table(rows), "\n", flush=True)
        print(f"### {bench_rope.GRAD_CAPTION.format(n=grad_repeats)}\n")
        rows = bench_rope.run_grad(lengths, repeats=grad_repeats, min_sample_s=sample_s)
        print(bench_rope.table_grad(rows), "\n", flush=True)
        rows = bench_rope.run_small(bench_rope.SMALL_SIZES[::4] if a.quick else bench_rope.SMALL_SIZES,
                                    repeats=grad_repeats, min_sample_s=sample_s)
        if rows:
            from posenc_lib.rotary import SMALL

            print(f"### {bench_rope.SMALL_CAPTION.format(small=SMALL, n=grad_repeats)}\n")
            print(bench_rope.table_small(rows), "\n", flush=True)
    if "attention" in a.only:
        bench_attention.check()
        if a.quick:
            t, mem = bench_attention.time_ratios(256), bench_attention.peak_memory(512)
        elif a.full:
            t, mem = bench_attention.time_ratios(16384), bench_attention.peak_memory(32768)
        else:
            t, mem = bench_attention.time_ratios(4096, repeats=3), bench_attention.peak_memory(8192)
        print("### Attention with a position bias, never building (H, L, L)\n")
        print(bench_attention.table(t, mem), "\n", flush=True)
    if "widgets" in a.only:
        print("### Notebook widgets: update time (compute + render)\n")
        print(bench_widgets.table(bench_widgets.run(repeats=1 if a.quick else 2, max_settings=4 if a.quick else None)),
              "\n", flush=True)
    print(f"(total {time.perf_counter() - t0:.0f} s)")


def device_tables(a: argparse.Namespace) -> None:
    """The GPU tables (issue 31): RoPE forward and forward + backward, attention with a bias; --tune the
    Triton kernel's launch shapes. --quick: tiny sizes (checks that everything runs, on any device)."""
    repeats, sample = (3, bench_rope.QUICK_SAMPLE_S) if a.quick else (25, 0.03)  # sample: CPU only
    if "rope" in a.only:
        shape = dict(heads_q=2, heads_k=1, d=16) if a.quick else {}
        lengths = (64,) if a.quick else ((4096, 16384, 65536) if a.full else (4096, 16384))
        hq, hk, d = shape.get("heads_q", 32), shape.get("heads_k", 8), shape.get("d", 128)
        print(f"### {bench_rope.DEVICE_CAPTION.format(device=a.device, hq=hq, hk=hk, d=d, n=repeats)}\n")
        rows = bench_rope.run_device(a.device, lengths, repeats=repeats, compiled=not a.quick, min_sample_s=sample,
                                     **shape)
        print(bench_rope.table_device(rows), "\n", flush=True)
        print(f"### {bench_rope.DEVICE_GRAD_CAPTION.format(device=a.device, n=repeats)}\n")
        rows = bench_rope.run_device_grad(a.device, lengths, repeats=repeats, min_sample_s=sample, **shape)
        print(bench_rope.table_device_grad(rows), "\n", flush=True)
        if a.tune:
            L = 64 if a.quick else 16384
            print(f"### {bench_rope.TRITON_SHAPES_CAPTION.format(L=L, dtype='bfloat16', n=repeats)}\n")
            rows = bench_rope.run_triton_shapes(a.device, L, repeats=repeats, min_sample_s=sample, **shape)
            print(bench_rope.table_triton_shapes(rows),
                  "\n", flush=True)
    if "attention" in a.only:
        shape = dict(heads=2, d=16) if a.quick else {}
        lengths = (64,) if a.quick else ((4096, 16384, 32768) if a.full else (4096, 16384))
        heads, d = shape.get("heads", 16), shape.get("d", 128)
        print(f"### {bench_attention.DEVICE_CAPTION.format(device=a.device, heads=heads, d=d, dtype='bfloat16', n=repeats)}\n")
        rows = bench_attention.run_device(a.device, lengths, repeats=repeats, grad=a.device == "cuda",
                                          min_sample_s=sample, **shape)
        print(bench_attention.table_device(rows), "\n", flush=True)


if __name__ == "__main__":
    main()
