"""Tiny versions of the benchmarks in benchmarks/: they run and check correctness, and the timing
helpers pair and count as they say (only coarse timing asserts)."""
import math
import statistics
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

import posenc_lib as pl

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/ is not installed
from benchmarks import _timing, bench_attention, bench_rope, bench_widgets, run_all  # noqa: E402


def _positive_finite(x: float) -> bool:
    return isinstance(x, float) and math.isfinite(x) and x > 0


def test_rope_benchmark_runs_and_checks_results():
    pytest.importorskip("transformers")
    rows = bench_rope.run(lengths=(32,), dtypes=("float32", "bfloat16"), heads=2, d=16, repeats=1, compiled=False,
                          min_sample_s=0.0)
    assert [(r["dtype"], r["L"]) for r in rows] == [("float32", 32), ("bfloat16", 32)]
    for r in rows:
        keys = ("bound_ms", "interleaved", "half", "module_interleaved", "module_half", "hf", "hf_over_half")
        assert all(_positive_finite(r[k]) for k in keys), r
    text = bench_rope.table(rows)
    assert text.count("\n") == 3 and "module half / bound" in text


def test_rope_grad_benchmark_runs_and_checks_gradients():
    rows = bench_rope.run_grad(lengths=(32, 48), dtypes=("float32", "bfloat16"), heads=2, d=16, repeats=2,
                               min_sample_s=0.0)
    assert [(r["dtype"], r["L"]) for r in rows] == [(t, L) for t in ("float32", "bfloat16") for L in (32, 48)]
    for r in rows:
        keys = ("bound_ms", "two_passes", "floor", "interleaved", "half", "module", "interleaved_over_floor",
                "module_over_two_passes")
        assert all(_positive_finite(r[k]) for k in keys), r
    text = bench_rope.table_grad(rows)
    assert text.count("\n") == 5 and "| bfloat16 | 48 |" in text and "interleaved / floor" in text


def test_small_size_benchmark_runs_where_the_kernel_is_built():
    from posenc_lib.kernels import cpu

    rows = bench_rope.run_small((256, 4096), dtypes=("float32",), repeats=1, min_sample_s=0.0)
    if not cpu.available():
        assert rows == []
        return
    assert [r["size"] for r in rows] == [256, 4096]
    assert all(_positive_finite(r[k]) for r in rows for k in ("ref_us", "fwd_interleaved", "fwd_half",
                                                                 "grad_interleaved", "grad_half"))
    assert bench_rope.table_small(rows).count("\n") == 3


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_floor_tables_are_the_ones_apply_rope_computes(dtype):
    """The grad benchmark's floor times exactly the cos/sin a stateless apply_rope computes."""
    from posenc_lib.rope import RopeOptions, position_angles, rope_tables

    x = torch.randn(2, 3, 40, 16, generator=torch.Generator().manual_seed(2)).to(dtype)
    cos, sin = bench_rope.stateless_tables(40, 16)
    want_cos, want_sin = rope_tables(position_angles(x, None, RopeOptions()))  # what apply_rope(x) rotates by
    assert cos.dtype == torch.float32 and torch.equal(cos, want_cos) and torch.equal(sin, want_sin)


class _WrongBackward(torch.autograd.Function):
    """apply_rope's forward with a backward that rotates by +angle instead of -angle."""

    @staticmethod
    def forward(ctx, x, layout):
        ctx.layout = layout
        return pl.apply_rope(x.detach(), layout=layout)

    @staticmethod
    def backward(ctx, grad):
        return pl.apply_rope(grad, layout=ctx.layout), None


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_gradient_check_accepts_rope_and_rejects_a_wrong_gradient(dtype, layout):
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, 2, 40, 16, generator=gen).to(dtype).requires_grad_()
    g = torch.randn(1, 2, 40, 16, generator=gen).to(dtype)
    bench_rope.check_grad(q, g, layout)
    with pytest.raises(AssertionError):
        bench_rope.check_grad(q, g, layout, rope=lambda x, layout: _WrongBackward.apply(x, layout))
    with pytest.raises(AssertionError):  # the right rotation at the wrong positions
        bench_rope.check_grad(q, g, layout, rope=lambda x, layout: pl.apply_rope(x, positions=torch.arange(1, 41),
                                                                    layout=layout))


def test_attention_benchmark_runs_and_checks_results():
    bench_attention.check(L=20, heads=2, d=8)
    t = bench_attention.time_ratios(64, heads=2, d=8)
    assert all(t[k] > 0 for k in ("alibi_causal", "alibi_symmetric", "t5"))
    mem = bench_attention.peak_memory(128, heads=2, d=8)
    assert mem["finite"] and mem["peak_mb"] > 0
    assert "Peak extra memory" in bench_attention.table(t, mem)


def test_widget_benchmark_times_every_widget(tmp_path):
    src = tmp_path / "notebooks" / "src"
    src.mkdir(parents=True)
    (src / "99_fake.py").write_text(textwrap.dedent('''\
        # %% [markdown]
        # A fake chapter with one widget.
        # %%
        %matplotlib inline
        import torch
        from ipywidgets import Dropdown, IntSlider
        from posenc_lib import viz
        w = viz.interactive_heatmap(lambda n, sign: sign * torch.arange(n * n).view(n, n), n=IntSlider(4, 2, 8),
                                    sign=Dropdown(options=[("plus", 1), ("minus", -1)], value=1))
        w
        # %%
        raise RuntimeError("a broken cell is reported, not fatal")
        '''))
    res = bench_widgets.run_notebook(src / "99_fake.py", repeats=1, max_settings=3)
    assert len(res["widgets"]) == 1 and res["widgets"][0]["n"] == 3
    assert res["widgets"][0]["median_ms"] > 0
    assert res["errors"] and "RuntimeError" in res["errors"][0]
    assert "99_fake.py" in bench_widgets.table([res])


def test_control_values_cover_each_kind_of_control():
    from ipywidgets import Checkbox, Dropdown, FloatLogSlider, FloatSlider, IntSlider

    assert bench_widgets.control_values(IntSlider(3, 1, 9)) == [1, 9, 5, 3]
    assert bench_widgets.control_values(FloatSlider(0.5, min=0, max=1, step=0.1)) == [0, 1, 0.5]
    assert bench_widgets.control_values(FloatLogSlider(100, base=10, min=1, max=4))[:2] == [10, 10000]
    assert bench_widgets.control_values(Dropdown(options=["a", "b"])) == ["a", "b"]
    assert bench_widgets.control_values(Checkbox(True)) == [False, True]


def test_runner_parses_its_options(capsys):
    run_all.main(["--only"])
    assert "posenc benchmarks" in capsys.readouterr().out


def test_paired_ratios_pair_each_round_with_its_reference():
    samples = {"ref": [1.0, 3.0, 2.0], "c": [3.0, 3.0, 4.0]}
    # rounds give 3, 1 and 2: the median is 2, where the ratio of medians would be 3 / 2
    assert _timing.paired_ratios(samples, "ref") == {"ref": 1.0, "c": 2.0}


def test_interleaved_samples_run_round_robin_with_one_call_count():
    log = []
    fns = {name: (lambda name=name: (log.append(name), _busy(1e-4))) for name in ("a", "b")}
    samples = _timing.interleaved_samples(fns, repeats=3, warmup=0, min_sample_s=0.05)
    assert [len(ts) for ts in samples.values()] == [3, 3]
    runs, count = [], 0  # (name, length) of each stretch of consecutive calls
    for i, name in enumerate(log):
        count += 1
        if i + 1 == len(log) or log[i + 1] != name:
            runs.append((name, count))
            count = 0
    assert [name for name, _ in runs] == ["a", "b"] * 3  # one sample per function per round
    lengths = {n for _, n in runs[1:]}  # the first stretch also holds the call that picks the count
    assert len(lengths) == 1 and lengths.pop() > 3  # every sample makes the same number of calls


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_interleaved_samples_report_seconds_per_call():
    samples = _timing.interleaved_samples({"short": lambda: _busy(1e-3), "long": lambda: _busy(3e-3)},
                                          repeats=5, min_sample_s=0.02)
    # a busy wait never ends early; a neighbour's load can only lengthen a sample
    assert all(t >= 1e-3 for t in samples["short"]) and all(t >= 3e-3 for t in samples["long"])
    # per call, not per sample: a sample of "short" repeats it for at least 20 ms
    assert statistics.median(samples["short"]) < 1e-2


def test_runner_prints_the_rope_tables(capsys):
    pytest.importorskip("transformers")
    run_all.main(["--quick", "--only", "rope"])
    out = capsys.readouterr().out
    assert "interleaved fwd+bwd / bound" in out and "module interleaved / bound" in out
    from posenc_lib.kernels import cpu

    small = cpu.available()  # the small-size table (256 elements is its first row) needs the built kernel
    assert ("Where the C kernel pays off" in out) == small
    assert out.count("| float32 | 256 |") == 2 + small and out.count("| bfloat16 | 256 |") == 2 + small


# ---------------------------------------------------------------- the GPU tables, run on the CPU at tiny sizes

def test_device_rope_tables_run_and_check_results_on_any_device():
    pytest.importorskip("transformers")
    rows = bench_rope.run_device("cpu", (32,), ("float32", "bfloat16"), heads_q=2, heads_k=1, d=16, repeats=1,
                                 compiled=False, min_sample_s=0.0)
    assert [(r["dtype"], r["L"]) for r in rows] == [("float32", 32), ("bfloat16", 32)]
    for r in rows:
        assert all(_positive_finite(r[k]) for k in ("bound_ms", "clone", "apply_rope", "module", "hf",
                                                      "apply_rope torch", "module torch")), r
    assert bench_rope.table_device(rows).count("\n") == 3
    rows = bench_rope.run_device_grad("cpu", (32,), ("float32",), heads_q=2, heads_k=1, d=16, repeats=1,
                                      min_sample_s=0.0)
    assert all(_positive_finite(rows[0][k]) for k in ("two_clones_ms", "apply_rope", "module", "hf"))
    assert "| float32 | 32 |" in bench_rope.table_device_grad(rows)


def test_device_rope_check_catches_a_wrong_candidate():
    """check_device compares every candidate with the CPU reference: a rotation at the wrong positions fails."""
    pytest.importorskip("transformers")
    q, k = torch.randn(1, 2, 16, 8), torch.randn(1, 1, 16, 8)
    bench_rope.check_device(q, k, {"apply_rope": lambda: (pl.apply_rope(q, layout="half"), pl.apply_rope(k, layout="half"))})
    with pytest.raises(AssertionError, match="shifted"):
        bench_rope.check_device(q, k, {"shifted": lambda: (pl.apply_rope(q, torch.arange(1, 17), layout="half"),
                                                           pl.apply_rope(k, layout="half"))})


def test_triton_shape_sweep_runs_under_the_interpreter(monkeypatch):
    pytest.importorskip("triton", reason="Triton is not installed here (the test lock has it on Linux x86-64 only)")
    from posenc_lib import rotary
    from posenc_lib.kernels import triton_rope

    monkeypatch.setattr(rotary, "triton_rope", triton_rope)
    rows = bench_rope.run_triton_shapes("cpu", 16, heads_q=2, heads_k=2, d=8, block_s=(4,), groups=(1, 2),
                                        num_warps=(4,), repeats=1, min_sample_s=0.0)
    assert len(rows) == 4 and all(_positive_finite(r["over_clone"]) for r in rows)
    assert bench_rope.table_triton_shapes(rows).count("\n") == 5


def test_device_attention_table_runs_on_any_device():
    rows = bench_attention.run_device("cpu", (64,), heads=2, d=16, repeats=1, grad=False, min_sample_s=0.0)
    r = rows[0]
    assert all(_positive_finite(r[k]) for k in ("sdpa_ms", "flex causal", "alibi_attention", "t5_attention",
                                                "sdpa dense bias"))
    assert r["alibi_attention MiB"] is None  # peak memory comes from CUDA's allocator only
    assert "| 64 |" in bench_attention.table_device(rows)


def test_device_timing_uses_the_generic_sampler_off_cuda():
    samples = _timing.device_samples({"a": lambda: _busy(1e-4)}, "cpu", repeats=3, warmup=0, min_sample_s=0.0)
    assert len(samples["a"]) == 3 and all(t >= 1e-4 for t in samples["a"])
    assert _timing.peak_bytes(lambda: torch.zeros(4), "cpu") is None


def test_runner_takes_a_device(capsys):
    run_all.main(["--device", "meta", "--only"])
    out = capsys.readouterr().out
    assert "posenc benchmarks" in out and "RoPE forward" not in out


def test_notebook_timing_reports_a_median_and_its_spread():
    """posenc_lib.timing (the notebooks' timing cells): milliseconds per call, and a spread that is a spread."""
    from posenc_lib.timing import block_ms, median_iqr_ms, median_ms

    median, iqr = median_iqr_ms(lambda: _busy(2e-3), min_run_time=0.05)
    assert 1.5 < median < 50 and 0 <= iqr < 50  # milliseconds; under load the spread may pass the median
    assert 1.5 < median_ms(lambda: _busy(2e-3), min_run_time=0.05) < 50
    blocks = block_ms(lambda: _busy(2e-3), min_run_time=0.05)
    assert blocks and blocks == sorted(blocks) and 1.5 < blocks[0] < 50  # one block or more: fewer under load
