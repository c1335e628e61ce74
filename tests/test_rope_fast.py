"""apply_rope's dispatch (rotary.rotate) and the torch fast path (kernels/torch_fast.py) equal the plain form;
the reference (rope.py) stays free of the fast paths."""
import os
import subprocess
import sys

import pytest
import torch

import posenc_lib as pl
from posenc_lib import rope as R
from posenc_lib import rotary
from posenc_lib.kernels import cpu, torch_fast
from posenc_lib.rope import RopeOptions


def tables(x, positions=None, **options):
    """cos and sin as apply_rope(x, positions, **options) hands them to the rotation."""
    opts = RopeOptions(**options)
    return R.rope_tables(R.position_angles(x, positions, opts), opts.attention_factor)


def plain(x, positions=None, layout="interleaved", base=10000.0, inv_freq=None, attention_factor=1.0):
    """The teaching form: cos/sin from rope_angles, rotate_pairs in float32 (float64), cast back."""
    cos, sin = tables(x, positions, base=base, inv_freq=inv_freq, attention_factor=attention_factor)
    work = x if x.dtype in (torch.float32, torch.float64) else x.float()
    return R.rotate_pairs(work, cos.to(work.dtype), sin.to(work.dtype), layout).to(x.dtype)


TOL = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.float64: dict(atol=1e-12, rtol=1e-12),
       torch.bfloat16: dict(atol=1e-2, rtol=1e-2), torch.float16: dict(atol=1e-3, rtol=1e-3)}


@pytest.fixture(params=["kernel", "torch"])
def path(request, every_size):
    """Run a test once with the CPU kernel allowed and once on the torch path, at any tensor size."""
    with cpu.use_cpu_kernel(request.param == "kernel"):
        yield request.param


@pytest.mark.parametrize("dtype", list(TOL))
@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("positions", ["none", "1d", "2d"])
def test_every_path_equals_plain_form(dtype, layout, positions, path, monkeypatch):
    monkeypatch.setattr(torch_fast, "_CHUNK_BYTES", 3000)  # many chunks, a ragged last one
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 41, 16, generator=g).to(dtype)
    pos = {"none": None, "1d": torch.randint(0, 9000, (41,), generator=g),
           "2d": torch.randint(0, 9000, (2, 41), generator=g)}[positions]
    out = pl.apply_rope(x, pos, layout=layout, attention_factor=1.25)
    assert out.dtype == dtype and out.shape == x.shape
    torch.testing.assert_close(out, plain(x, pos, layout, attention_factor=1.25), **TOL[dtype])


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_non_contiguous_input(layout, path):
    x = torch.randn(2, 30, 4, 8).transpose(1, 2)  # (batch, heads, seq, d) view of (batch, seq, heads, d)
    torch.testing.assert_close(pl.apply_rope(x, layout=layout), plain(x, layout=layout))
    y = torch.randn(5, 12)[:, ::2]  # odd strides: no complex view possible
    torch.testing.assert_close(pl.apply_rope(y, layout=layout), plain(y, layout=layout))


def test_apply_rope_is_stateless():
    """No table cache anywhere: new values in the same inv_freq tensor give new results at once."""
    x = torch.randn(1, 2, 9, 8)
    inv = pl.rope_frequencies(8, base=7.0)
    first = pl.apply_rope(x, inv_freq=inv)
    inv.mul_(2)  # same tensor object, new values
    torch.testing.assert_close(pl.apply_rope(x, inv_freq=inv), plain(x, inv_freq=inv))
    assert not torch.allclose(first, pl.apply_rope(x, inv_freq=inv))
    for kw in (dict(base=100.0), dict(base=10000.0), dict(attention_factor=2.0)):
        torch.testing.assert_close(pl.apply_rope(x, **kw), plain(x, **kw))


def test_no_module_level_tensor_cache():
    """The reference and the kernels keep no tensors at module level (caches belong to modules)."""
    import posenc_lib.kernels.compiled as compiled

    for mod in (R, rotary, cpu, torch_fast, compiled):
        for name, value in vars(mod).items():
            assert not isinstance(value, torch.Tensor), f"{mod.__name__}.{name} is a module-level tensor"
            if isinstance(value, (dict, list, tuple)) and not name.isupper():
                items = value.values() if isinstance(value, dict) else value
                assert not any(isinstance(t, (torch.Tensor, tuple)) for t in items), f"{mod.__name__}.{name}"


def test_output_never_aliases_the_input():
    x = torch.randn(4, 8)
    a = pl.apply_rope(x)
    a.zero_()
    torch.testing.assert_close(pl.apply_rope(x), plain(x))


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_autograd_through_x_and_inv_freq(layout, path):
    x = torch.randn(2, 7, 8, dtype=torch.float64, requires_grad=True)
    inv = pl.rope_frequencies(8, dtype=torch.float64).requires_grad_()
    pl.apply_rope(x, layout=layout, inv_freq=inv).pow(2).sum().backward()
    # rotations preserve norms: d/dx |Rx|^2 = 2x
    torch.testing.assert_close(x.grad, 2 * x.detach())
    assert inv.grad is not None


def test_torch_fast_path_needs_no_gradient():
    x = torch.randn(3, 8, requires_grad=True)
    cos, sin = tables(x)
    assert not torch_fast.applies(x, cos, sin)
    with torch.no_grad():
        assert torch_fast.applies(x, cos, sin)


def test_compiled_path_validates_and_falls_back_without_compiling():
    with pytest.raises(ValueError, match="layout must be one of"):
        pl.apply_rope_compiled(torch.randn(3, 4), layout="neox")
    with pytest.raises(ValueError, match="must be even"):
        pl.apply_rope_compiled(torch.randn(3, 5))
    x = torch.randn(3, 4, requires_grad=True)  # autograd: served by apply_rope, nothing compiled
    torch.testing.assert_close(pl.apply_rope_compiled(x), pl.apply_rope(x))


def test_compiled_path_takes_every_rope_option():
    """apply_rope_compiled runs apply_rope's body: rotary_dim too (its docstring says "same arguments")."""
    x = torch.randn(3, 6, 12, requires_grad=True)  # autograd: apply_rope's paths, nothing compiled
    kw = dict(rotary_dim=8, layout="half", base=500.0, attention_factor=1.5)
    assert torch.equal(pl.apply_rope_compiled(x, **kw), pl.apply_rope(x, **kw))
    with pytest.raises(ValueError, match="rotary_dim must be at most the head dimension"):
        pl.apply_rope_compiled(x, rotary_dim=14)


# ---------------------------------------------------------------- the size rule

def _run(code: str, **env) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, **env}).stdout


def test_a_chapter_sized_example_builds_no_kernel(tmp_path):
    """A student's first calls never build or load the C kernel: small tensors take the reference."""
    out = _run("""
import torch, posenc_lib as pl
from posenc_lib.kernels import cpu
x = torch.randn(5, 4)
pl.apply_rope(x); pl.apply_rope(x.bfloat16(), layout="half"); pl.RotaryEmbedding(4)(x, x)
pl.apply_rope_nd(x, torch.zeros(5, 2, dtype=torch.long), sections=(1, 1))
pl.apply_rope(torch.randn(5, 4, requires_grad=True)).sum().backward()
with torch.no_grad():
    pl.TinyDecoder(vocab_size=11, positional="rope", d_model=32, num_heads=2, num_layers=3)(torch.zeros(1, 6, dtype=torch.long))
print(cpu._state["tried"], cpu.enabled())
""", POSENC_KERNEL_DIR=str(tmp_path))
    assert out.split() == ["False", str(cpu.enabled())]  # never tried to build it, whether enabled or not
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_size_threshold_changes_the_path_not_the_numbers(layout, dtype, monkeypatch):
    """Just below rotary.SMALL the reference rotates, at it the fast path: both give the reference's bits
    (the C kernel's bit-identity; the torch path is compared under POSENC_CPU_KERNEL=0 within rounding)."""
    asked = []
    real = cpu.applies
    monkeypatch.setattr(cpu, "applies", lambda *a: asked.append(real(*a)) or asked[-1])
    d = 16
    below = torch.randn(2, rotary.SMALL // (2 * d) - 1, d).to(dtype)
    at = torch.randn(2, rotary.SMALL // (2 * d), d).to(dtype)
    assert below.numel() < rotary.SMALL == at.numel()
    with torch.no_grad():
        assert torch.equal(pl.apply_rope(below, layout=layout), plain(below, layout=layout))
        assert asked == []  # the fast paths were not even asked
        got = pl.apply_rope(at, layout=layout)
    assert asked == [cpu.available()]  # asked, and served where the kernel is built
    if asked[0]:
        assert torch.equal(got, plain(at, layout=layout))
    else:
        torch.testing.assert_close(got, plain(at, layout=layout))
