"""apply_rope's fast path (posenc_lib.rope internals) equals the plain rotate_pairs form."""
import pytest
import torch

import posenc_lib as pl
from posenc_lib import rope as R


def plain(x, positions=None, layout="interleaved", base=10000.0, inv_freq=None, attention_factor=1.0):
    """The teaching form: cos/sin from rope_angles, rotate_pairs in float32 (float64), cast back."""
    cos, sin = R._cos_sin(x, positions, base, inv_freq, attention_factor)
    work = x if x.dtype in (torch.float32, torch.float64) else x.float()
    return R.rotate_pairs(work, cos.to(work.dtype), sin.to(work.dtype), layout).to(x.dtype)


TOL = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.float64: dict(atol=1e-12, rtol=1e-12),
       torch.bfloat16: dict(atol=1e-2, rtol=1e-2), torch.float16: dict(atol=1e-3, rtol=1e-3)}


@pytest.mark.parametrize("dtype", list(TOL))
@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("positions", ["none", "1d", "2d"])
def test_fast_path_equals_plain_form(dtype, layout, positions, monkeypatch):
    monkeypatch.setattr(R, "_CHUNK_BYTES", 3000)  # many chunks, a ragged last one
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 41, 16, generator=g).to(dtype)
    pos = {"none": None, "1d": torch.randint(0, 9000, (41,), generator=g),
           "2d": torch.randint(0, 9000, (2, 41), generator=g)}[positions]
    out = pl.apply_rope(x, pos, layout=layout, attention_factor=1.25)
    assert out.dtype == dtype and out.shape == x.shape
    torch.testing.assert_close(out, plain(x, pos, layout, attention_factor=1.25), **TOL[dtype])


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_fast_path_on_non_contiguous_input(layout):
    x = torch.randn(2, 30, 4, 8).transpose(1, 2)  # (batch, heads, seq, d) view of (batch, seq, heads, d)
    torch.testing.assert_close(pl.apply_rope(x, layout=layout), plain(x, layout=layout))
    y = torch.randn(5, 12)[:, ::2]  # odd strides: no complex view possible
    torch.testing.assert_close(pl.apply_rope(y, layout=layout), plain(y, layout=layout))


def test_cached_tables_follow_base_inv_freq_and_factor():
    x = torch.randn(1, 2, 9, 8)
    for kw in (dict(base=100.0), dict(base=10000.0), dict(inv_freq=pl.rope_frequencies(8, base=7.0)),
               dict(attention_factor=2.0), dict(base=100.0)):
        torch.testing.assert_close(pl.apply_rope(x, **kw), plain(x, **kw))
    inv = pl.rope_frequencies(8, base=7.0)
    first = pl.apply_rope(x, inv_freq=inv)
    inv.mul_(2)  # same tensor object, new values: must not hit a stale cache entry
    torch.testing.assert_close(pl.apply_rope(x, inv_freq=inv), plain(x, inv_freq=inv))
    assert not torch.allclose(first, pl.apply_rope(x, inv_freq=inv))
    assert len(R._TABLE_CACHE) <= R._TABLE_CACHE_SIZE


def test_cache_does_not_leak_into_results():
    """The output never aliases a cached table (writing to it changes nothing later)."""
    x = torch.randn(4, 8)
    a = pl.apply_rope(x)
    a.zero_()
    torch.testing.assert_close(pl.apply_rope(x), plain(x))


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_autograd_still_works(layout):
    x = torch.randn(2, 7, 8, dtype=torch.float64, requires_grad=True)
    inv = pl.rope_frequencies(8, dtype=torch.float64).requires_grad_()
    pl.apply_rope(x, layout=layout, inv_freq=inv).pow(2).sum().backward()
    # rotations preserve norms: d/dx |Rx|^2 = 2x
    torch.testing.assert_close(x.grad, 2 * x.detach())
    assert inv.grad is not None


def test_compiled_path_validates_and_falls_back_without_compiling():
    with pytest.raises(ValueError, match="layout must be one of"):
        pl.apply_rope_compiled(torch.randn(3, 4), layout="neox")
    with pytest.raises(ValueError, match="must be even"):
        pl.apply_rope_compiled(torch.randn(3, 5))
    x = torch.randn(3, 4, requires_grad=True)  # autograd: served by apply_rope, nothing compiled
    torch.testing.assert_close(pl.apply_rope_compiled(x), pl.apply_rope(x))
