"""Tiny versions of the benchmarks in benchmarks/: they run and check correctness (no timing asserts)."""
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/ is not installed
from benchmarks import bench_attention, bench_rope, bench_widgets, run_all  # noqa: E402


def test_rope_benchmark_runs_and_checks_results():
    pytest.importorskip("transformers")
    rows = bench_rope.run(lengths=(32,), dtypes=("float32", "bfloat16"), heads=2, d=16, repeats=1, compiled=False)
    assert [(r["dtype"], r["L"]) for r in rows] == [("float32", 32), ("bfloat16", 32)]
    for r in rows:
        assert all(r[k] > 0 for k in ("interleaved", "half", "hf", "hf_over_half"))
    assert bench_rope.table(rows).count("\n") == 3


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
