"""apply_rope's dispatch (rope._rotate) and the torch fast path (kernels/torch_fast.py) equal the plain form."""
import pytest
import torch

import posenc_lib as pl
from posenc_lib import rope as R
from posenc_lib.kernels import cpu, torch_fast


def plain(x, positions=None, layout="interleaved", base=10000.0, inv_freq=None, attention_factor=1.0):
    """The teaching form: cos/sin from rope_angles, rotate_pairs in float32 (float64), cast back."""
    cos, sin = R._cos_sin(x, positions, base, inv_freq, attention_factor)
    work = x if x.dtype in (torch.float32, torch.float64) else x.float()
    return R.rotate_pairs(work, cos.to(work.dtype), sin.to(work.dtype), layout).to(x.dtype)


TOL = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.float64: dict(atol=1e-12, rtol=1e-12),
       torch.bfloat16: dict(atol=1e-2, rtol=1e-2), torch.float16: dict(atol=1e-3, rtol=1e-3)}


@pytest.fixture(params=["kernel", "torch"])
def path(request):
    """Run a test once with the CPU kernel allowed and once on the torch path."""
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

    for mod in (R, cpu, torch_fast, compiled):
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
    cos, sin = R._cos_sin(x, None, 10000.0, None, 1.0)
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
