"""RoPE's CPU kernel (posenc_lib/kernels/cpu.py, kernels/csrc/rope_kernel.c).

The kernel promises results bit-identical to the plain form (rotate_pairs in float32,
cast back with torch's rounding), so these tests compare bits, not tolerances.
"""
import pytest
import torch

import posenc_lib as pl
from posenc_lib import rope as R
from posenc_lib.kernels import cpu as K
from posenc_lib.rope import RopeOptions

HAS_CC = K._compiler() is not None and K.enabled()
needs_kernel = pytest.mark.skipif(not HAS_CC, reason="no C compiler on this machine, or POSENC_CPU_KERNEL=0: "
                                                    "apply_rope keeps its torch path")


def tables(x, positions=None, inv_freq=None, attention_factor=1.0):
    """cos and sin as apply_rope hands them to the rotation."""
    return R.rope_tables(R.position_angles(x, positions, RopeOptions(inv_freq=inv_freq)), attention_factor)


def plain(x, positions=None, layout="interleaved", attention_factor=1.0, inv_freq=None):
    cos, sin = tables(x, positions, inv_freq, attention_factor)
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
def spy(monkeypatch, every_size):
    """One entry per apply_rope rotation of any size: True where the kernel served it."""
    served = []
    real = K.applies

    def counting(*args, **kwargs):
        ok = real(*args, **kwargs)
        served.append(ok)
        return ok

    monkeypatch.setattr(K, "applies", counting)
    return served


def test_kernel_is_built_where_there_is_a_compiler():
    if not HAS_CC:
        pytest.skip("no C compiler on this machine, or POSENC_CPU_KERNEL=0")
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
    """Non-contiguous, float64, float16, gradients through cos/sin and a disabled kernel use the torch path."""
    x = torch.randn(2, 30, 4, 8).transpose(1, 2)
    assert not K.applies(x, *tables(x))
    torch.testing.assert_close(pl.apply_rope(x, layout="half"), plain(x, layout="half"))
    for dtype in (torch.float64, torch.float16):
        y = torch.randn(3, 8, 16).to(dtype)
        torch.testing.assert_close(pl.apply_rope(y), R.rotate_pairs(y.double(), *[t.double() for t in tables(y)]).to(
            dtype), atol=1e-3, rtol=1e-3)
    inv = pl.rope_frequencies(16).requires_grad_()
    z = torch.randn(3, 8, 16)
    assert not K.applies(z, *tables(z, inv_freq=inv))
    pl.apply_rope(z, inv_freq=inv).sum().backward()
    assert inv.grad is not None
    spy.clear()
    with K.use_cpu_kernel(False):
        w = torch.randn(3, 8, 16)
        torch.testing.assert_close(pl.apply_rope(w), plain(w))
    assert not any(spy)
    assert K.enabled()


def test_environment_variable_turns_it_off(monkeypatch, every_size):
    monkeypatch.setenv("POSENC_CPU_KERNEL", "0")
    assert not K.enabled() and not K.available()
    x = torch.randn(4, 8)
    assert not K.applies(x, *tables(x))
    torch.testing.assert_close(pl.apply_rope(x), plain(x))


@needs_kernel
def test_build_caches_by_source_hash(tmp_path, monkeypatch):
    monkeypatch.setenv("POSENC_KERNEL_DIR", str(tmp_path))
    path = K.build()
    assert path.parent == tmp_path and path.exists() and path.name.startswith("rope_kernel-")
    stamp = path.stat().st_mtime_ns
    assert K.build() == path and path.stat().st_mtime_ns == stamp  # cached: not rebuilt
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary files left behind


def test_missing_compiler_falls_back_to_torch(tmp_path, monkeypatch, every_size):
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
    assert "kernels/csrc/*.c" in meta["tool"]["setuptools"]["package-data"]["posenc_lib"]
    assert "-ffp-contract=off" in K.FLAGS  # fused multiply-add would break bit-identity


# ------------------------------------------------------------------ the registered operator

def reference_grad(x, g, layout, positions=None):
    """d/dx <apply_rope(x), g> in float64 through the plain form (autograd of rotate_pairs)."""
    xd = x.detach().double().requires_grad_()
    pos = R.sequence_positions(positions, xd)
    angles = R.broadcast_over_heads(pl.rope_angles(pos, x.shape[-1]).double(), x)
    out = R.rotate_pairs(xd, angles.cos(), angles.sin(), layout)
    (grad,) = torch.autograd.grad(out, xd, g.double())
    return grad


@needs_kernel
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("positions", ["none", "2d"])
def test_backward_is_the_kernel_rotating_back_and_matches_float64(dtype, layout, positions, spy):
    g0 = torch.Generator().manual_seed(3)
    x = torch.randn(2, 3, 37, 16, generator=g0).to(dtype).requires_grad_()
    g = torch.randn(2, 3, 37, 16, generator=g0).to(dtype)
    pos = torch.randint(0, 5000, (2, 37), generator=g0) if positions == "2d" else None
    out = pl.apply_rope(x, pos, layout=layout)
    assert out.grad_fn is not None and "rope_rotate" in type(out.grad_fn).__name__
    (grad,) = torch.autograd.grad(out, x, g)
    assert all(spy)
    tol = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=2e-2, rtol=1e-2)
    torch.testing.assert_close(grad.double(), reference_grad(x, g, layout, pos), **tol)
    # In float32 the backward is bit-identical to the plain form rotating by -angle.
    cos, sin = tables(x, pos)
    back = R.rotate_in_float32(g, cos, -sin, layout)
    assert same_bits(grad, back)


@needs_kernel
@pytest.mark.filterwarnings("ignore:Input #0 requires gradient")
def test_gradcheck_and_double_backward():
    """torch.autograd.gradcheck in float32 against finite differences, and a second derivative."""
    x = torch.randn(2, 5, 8, dtype=torch.float32, requires_grad=True)
    cos, sin = tables(x)
    fn = lambda t: K.rope_rotate(t, cos, sin, True, False)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x,), eps=1e-2, atol=1e-2, rtol=1e-2, fast_mode=True)
    (gx,) = torch.autograd.grad(fn(x).pow(2).sum(), x, create_graph=True)
    (ggx,) = torch.autograd.grad(gx.sum(), x)
    torch.testing.assert_close(ggx, torch.full_like(x, 2.0))  # d^2/dx^2 |Rx|^2 = 2 I


def test_operator_has_a_fake_implementation_for_meta_tensors():
    x = torch.empty(2, 3, 11, 8, device="meta", dtype=torch.bfloat16)
    cos = torch.empty(11, 4, device="meta")
    out = K.rope_rotate(x, cos, cos, False, False)
    assert out.device.type == "meta" and out.shape == x.shape and out.dtype == x.dtype
    y = torch.empty(2, 3, 11, 8, device="meta", requires_grad=True)
    r = pl.apply_rope(y, layout="half")
    r.sum().backward()
    assert r.device.type == "meta" and y.grad.shape == y.shape


@needs_kernel
def test_torch_compile_fullgraph_keeps_the_kernel_in_the_graph(every_size):
    import torch._dynamo

    graphs = []

    def recording_backend(gm, example_inputs):
        graphs.append(str(gm.graph))
        return gm.forward

    torch._dynamo.reset()
    x = torch.randn(2, 3, 17, 16)
    for layout in ("interleaved", "half"):
        out = torch.compile(pl.apply_rope, fullgraph=True, backend=recording_backend)(x, layout=layout)
        assert torch.equal(out, pl.apply_rope(x, layout=layout))
    assert graphs and all("posenc.rope_rotate" in g for g in graphs)


@needs_kernel
def test_torch_compile_with_inductor_equals_eager_forward_and_backward(every_size):
    import torch._dynamo

    torch._dynamo.reset()
    x = torch.randn(2, 3, 17, 16, requires_grad=True)
    fn = torch.compile(pl.apply_rope, fullgraph=True)
    out = fn(x)
    # Inductor generates its own sin/cos, so the tables may differ from eager in the last bit.
    torch.testing.assert_close(out, pl.apply_rope(x), atol=1e-6, rtol=1e-6)
    (g1,) = torch.autograd.grad(out.sum(), x)
    (g2,) = torch.autograd.grad(pl.apply_rope(x).sum(), x)
    torch.testing.assert_close(g1, g2, atol=1e-6, rtol=1e-6)
