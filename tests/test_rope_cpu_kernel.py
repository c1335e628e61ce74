"""RoPE's CPU kernel (posenc_lib/rope_cpu_kernel.py, csrc/rope_kernel.c).

The kernel promises results bit-identical to the plain form (rotate_pairs in float32,
cast back with torch's rounding), so these tests compare bits, not tolerances.
"""
import pytest
import torch

import posenc_lib as pl
from posenc_lib import rope as R
from posenc_lib import rope_cpu_kernel as K

HAS_CC = K._compiler() is not None
needs_kernel = pytest.mark.skipif(not HAS_CC, reason="no C compiler on this machine: apply_rope keeps its torch path")


def plain(x, positions=None, layout="interleaved", attention_factor=1.0, inv_freq=None):
    cos, sin = R._cos_sin(x, positions, 10000.0, inv_freq, attention_factor)
    return R.rotate_pairs(x.float(), cos, sin, layout).to(x.dtype)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal bit patterns for float32 and bfloat16, where a NaN matches any NaN.

    (torch itself writes a bfloat16 NaN as 0x7FC0 or 0xFFFF depending on whether its
    scalar or vector loop converted it, so NaN payloads carry no meaning.)
    """
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    view = torch.int32 if a.dtype == torch.float32 else torch.int16
    nan = a.isnan()
    return torch.equal(nan, b.isnan()) and torch.equal(a.view(view)[~nan], b.view(view)[~nan])


@pytest.fixture
def spy(monkeypatch):
    """Counts the calls the kernel actually served."""
    served = []
    real = K.rotate

    def counting(*args, **kwargs):
        out = real(*args, **kwargs)
        served.append(out is not None)
        return out

    monkeypatch.setattr(K, "rotate", counting)
    return served


def test_kernel_is_built_where_there_is_a_compiler():
    if not HAS_CC:
        pytest.skip("no C compiler on this machine")
    assert K.available(), K.build_error()
    assert K.library_path().exists()


@needs_kernel
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("positions", ["none", "1d", "2d"])
@pytest.mark.parametrize("shape", [(2, 3, 41, 16), (5, 2), (7, 130, 64), (2, 1, 1, 128)])
def test_kernel_is_bit_identical_to_the_plain_form(dtype, layout, positions, shape, spy):
    g = torch.Generator().manual_seed(sum(shape))
    x = (torch.randn(*shape, generator=g) * 30).to(dtype)
    seq = shape[-2]
    pos = {"none": None, "1d": torch.randint(0, 90000, (seq,), generator=g),
           "2d": torch.randint(0, 90000, (shape[0], seq), generator=g) if len(shape) > 2 else None}[positions]
    out = pl.apply_rope(x, pos, layout=layout, attention_factor=1.25)
    assert spy and all(spy), "the kernel did not serve this call"
    assert same_bits(out, plain(x, pos, layout, attention_factor=1.25))


@needs_kernel
@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_bfloat16_rounding_and_special_values_match_torch(layout, spy):
    vals = torch.tensor([0.0, -0.0, 1.0, -1.0, 3.0e38, -3.0e38, float("inf"), float("-inf"), float("nan"),
                         1e-40, 2.0**-133, 1.00390625, 1.01171875, 255.5, -65504.0, 7.0e-3])
    x = vals[torch.randperm(len(vals), generator=torch.Generator().manual_seed(1))].repeat(24, 4)
    x = torch.cat((x, vals.repeat(24, 4)), dim=-1).reshape(24, 128)  # every value meets every other
    for dtype in (torch.float32, torch.bfloat16):
        xd = x.to(dtype)
        assert same_bits(pl.apply_rope(xd, layout=layout), plain(xd, layout=layout))
    assert all(spy)


@needs_kernel
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_result_does_not_depend_on_the_thread_count(threads):
    x = torch.randn(3, 4, 999, 32, generator=torch.Generator().manual_seed(2))  # ragged thread shares
    ref = plain(x, layout="half")
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(threads)
        assert same_bits(pl.apply_rope(x, layout="half"), ref)
    finally:
        torch.set_num_threads(old)


@needs_kernel
def test_kernel_steps_aside_where_it_does_not_apply(spy):
    """Non-contiguous, float64, float16, autograd and a disabled kernel use the torch path."""
    x = torch.randn(2, 30, 4, 8).transpose(1, 2)
    assert K.rotate(x, *R._tables(x, None, 10000.0, "cos_sin", None, 1.0), "half") is None
    torch.testing.assert_close(pl.apply_rope(x, layout="half"), plain(x, layout="half"))
    for dtype in (torch.float64, torch.float16):
        y = torch.randn(3, 8, 16).to(dtype)
        torch.testing.assert_close(pl.apply_rope(y), R.rotate_pairs(y.double(), *[t.double() for t in R._cos_sin(
            y, None, 10000.0, None, 1.0)]).to(dtype), atol=1e-3, rtol=1e-3)
    z = torch.randn(3, 8, 16, requires_grad=True)
    pl.apply_rope(z).sum().backward()
    assert z.grad is not None
    spy.clear()
    with K.use_cpu_kernel(False):
        w = torch.randn(3, 8, 16)
        torch.testing.assert_close(pl.apply_rope(w), plain(w))
    assert not any(spy)
    assert K.enabled()


def test_environment_variable_turns_it_off(monkeypatch):
    monkeypatch.setenv("POSENC_CPU_KERNEL", "0")
    assert not K.enabled() and not K.available()
    x = torch.randn(4, 8)
    assert K.rotate(x, *R._tables(x, None, 10000.0, "cos_sin", None, 1.0), "interleaved") is None
    torch.testing.assert_close(pl.apply_rope(x), plain(x))


@needs_kernel
def test_build_caches_by_source_hash(tmp_path, monkeypatch):
    monkeypatch.setenv("POSENC_KERNEL_DIR", str(tmp_path))
    path = K.build()
    assert path.parent == tmp_path and path.exists() and path.name.startswith("rope_kernel-")
    stamp = path.stat().st_mtime_ns
    assert K.build() == path and path.stat().st_mtime_ns == stamp  # cached: not rebuilt
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary files left behind


def test_missing_compiler_falls_back_to_torch(tmp_path, monkeypatch):
    monkeypatch.setenv("POSENC_KERNEL_DIR", str(tmp_path))
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    monkeypatch.setattr(K, "_state", {"lib": None, "tried": False, "error": None, "enabled": None})
    with pytest.raises((RuntimeError, OSError)):
        K.build()
    assert not K.available()
    assert "no-such-compiler" in (K.build_error() or "")
    x = torch.randn(2, 6, 8)
    torch.testing.assert_close(pl.apply_rope(x, layout="half"), plain(x, layout="half"))


@needs_kernel
def test_broken_compiler_reports_its_message(tmp_path, monkeypatch):
    fake = tmp_path / "cc"
    fake.write_text("#!/bin/sh\necho 'error: this compiler is broken' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("POSENC_KERNEL_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CC", str(fake))
    with pytest.raises(RuntimeError, match="this compiler is broken"):
        K.build()
    assert not any(p.suffix == ".tmp" for p in (tmp_path / "cache").iterdir())


def test_the_c_source_ships_with_the_package():
    import tomllib
    from pathlib import Path

    assert K.SOURCE.exists()
    meta = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert "csrc/*.c" in meta["tool"]["setuptools"]["package-data"]["posenc_lib"]
    assert "-ffp-contract=off" in K.FLAGS  # fused multiply-add would break bit-identity
