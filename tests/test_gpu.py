"""On a GPU (marker ``gpu``: skipped with one line elsewhere; ``make test-gpu`` runs them).

* CUDA results equal CPU results for every public forward function, in float32, bfloat16 and float16;
* no public forward function waits on the host (``torch.cuda.set_sync_debug_mode("error")``);
* ``RotaryEmbedding`` and ``alibi_attention`` under ``torch.compile(fullgraph=True)``;
* the Triton RoPE kernel (kernels/triton_rope.py) compiled: the table path is the CUDA reference bit for
  bit, the register path within the stated rounding, GQA in one launch, gradients;
* FlexAttention (kernels/flex.py): the dense references, T5's gradients, and memory without (H, L, L).
Inputs are drawn on the CPU and moved; tolerances are per dtype (CPU and GPU round differently).
"""
from __future__ import annotations

from typing import Any, Callable

import pytest
import torch

import posenc_lib as pl
from posenc_lib import rotary
from posenc_lib.rope import RopeOptions, position_angles, rope_tables, rotate_at_positions, rotate_in_float32

pytestmark = pytest.mark.gpu
CUDA = torch.device("cuda")
DTYPES = (torch.float32, torch.bfloat16, torch.float16)
# CUDA against CPU: RoPE differs by cos/sin's last bit (float32) or one output rounding; attention by the
# order of its sums.
TOL = {torch.float32: dict(atol=2e-5, rtol=2e-5), torch.bfloat16: dict(atol=2e-2, rtol=2e-2),
       torch.float16: dict(atol=2e-3, rtol=2e-3)}


def randn(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def ints(high: int, *shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, high, shape, generator=torch.Generator().manual_seed(seed))


def to(x: Any, device: torch.device) -> Any:
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, torch.nn.Module):
        return x.to(device)
    if isinstance(x, (tuple, list)):
        return type(x)(to(t, device) for t in x)
    if isinstance(x, dict):  # keyword arguments (attention's bias): on an H200 they had stayed on the CPU
        return {key: to(t, device) for key, t in x.items()}
    return x


def _t5(dtype):
    torch.manual_seed(0)  # the same bias table for the CPU and the CUDA run
    t5 = pl.T5RelativeBias(4, num_buckets=8, max_distance=20)
    return pl.t5_attention, (randn(1, 4, 45, 32, dtype=dtype), randn(1, 4, 45, 32, dtype=dtype, seed=1),
                             randn(1, 4, 45, 32, dtype=dtype, seed=2), t5.to(dtype)), {}


def _causal_ramp(heads: int, k_len: int, dtype: torch.dtype) -> torch.Tensor:
    """A random bias per offset with the future hidden (-inf), as toeplitz_attention's causal callers pass it."""
    ramp = randn(heads, 2 * k_len - 1, dtype=dtype)
    ramp[:, k_len:] = float("-inf")
    return ramp


def _rotary(**kw):
    def build(dtype):
        rot = pl.RotaryEmbedding(16, layout="half", **kw)
        return rot, (randn(2, 4, 33, 16, dtype=dtype), randn(2, 2, 33, 16, dtype=dtype, seed=1)), {"offset": 5}
    return build


# name -> dtype -> (function or module, args, kwargs), built on the CPU; run on the CPU and on CUDA.
FORWARDS: dict[str, Callable[[torch.dtype], tuple[Callable, tuple, dict]]] = {
    "apply_rope": lambda dt: (pl.apply_rope, (randn(2, 4, 33, 16, dtype=dt), ints(60000, 33)), {}),
    "apply_rope half partial factor": lambda dt: (pl.apply_rope, (randn(2, 4, 33, 24, dtype=dt), ints(9000, 2, 33)),
                                                  dict(layout="half", rotary_dim=16, attention_factor=1.2)),
    "apply_rope chapter size": lambda dt: (pl.apply_rope, (randn(5, 4, dtype=dt),), {}),
    "RotaryEmbedding": _rotary(),
    "RotaryEmbedding partial": _rotary(rotary_dim=8, attention_factor=1.1),
    "apply_rope_compiled": lambda dt: (pl.apply_rope_compiled, (randn(2, 4, 33, 16, dtype=dt),), {}),
    "apply_rope_nd": lambda dt: (pl.apply_rope_nd, (randn(1, 2, 9, 16, dtype=dt), ints(20, 9, 3)),
                                 dict(sections=(2, 3, 3))),
    "apply_rope_2d": lambda dt: (pl.apply_rope_2d, (randn(1, 2, 12, 16, dtype=dt), *pl.axial_positions(3, 4)), {}),
    "alibi_attention causal": lambda dt: (pl.alibi_attention, tuple(randn(1, 4, 300, 32, dtype=dt, seed=s)
                                                                      for s in range(3)), {}),
    "alibi_attention symmetric": lambda dt: (pl.alibi_attention, tuple(randn(1, 4, 300, 32, dtype=dt, seed=s)
                                                                         for s in range(3)), dict(mode="symmetric")),
    "alibi_attention decoding": lambda dt: (pl.alibi_attention, (randn(1, 4, 3, 32, dtype=dt),
                                                                 randn(1, 4, 200, 32, dtype=dt, seed=1),
                                                                 randn(1, 4, 200, 32, dtype=dt, seed=2)), {}),
    "alibi_attention small head": lambda dt: (pl.alibi_attention, tuple(randn(1, 2, 9, 8, dtype=dt, seed=s)
                                                                          for s in range(3)), {}),
    "t5_attention": _t5,
    "toeplitz_attention": lambda dt: (pl.toeplitz_attention, (*(randn(1, 2, 40, 16, dtype=dt, seed=s) for s in range(3)),
                                                              _causal_ramp(2, 40, dt)), dict(causal=True)),
    "attention": lambda dt: (pl.attention, (*(randn(1, 2, 9, 16, dtype=dt, seed=s) for s in range(3)),),
                             dict(bias=pl.alibi_bias(2, 9).to(dt))),
}


def _run(name: str, dtype: torch.dtype, device: torch.device):
    fn, args, kwargs = FORWARDS[name](dtype)
    with torch.no_grad():
        return to(fn, device)(*to(args, device), **to(kwargs, device))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(FORWARDS))
def test_cuda_equals_cpu(name, dtype):
    if name == "apply_rope_compiled" and dtype != torch.float32:
        pytest.skip("one dtype is enough to check the compiled path (each compiles)")
    want, got = _run(name, dtype, torch.device("cpu")), _run(name, dtype, CUDA)
    for w, g in zip(*(out if isinstance(out, tuple) else (out,) for out in (want, got))):
        assert g.device.type == "cuda" and g.dtype == w.dtype
        torch.testing.assert_close(g.cpu(), w, **TOL[dtype])


@pytest.mark.parametrize("name", list(FORWARDS))
def test_no_public_forward_synchronises(name):
    fn, args, kwargs = FORWARDS[name](torch.bfloat16)
    fn, args, kwargs = to(fn, CUDA), to(args, CUDA), to(kwargs, CUDA)
    with torch.no_grad():
        fn(*args, **kwargs)  # first call: builds caches, compiles (allowed to wait)
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            fn(*args, **kwargs)
        finally:
            torch.cuda.set_sync_debug_mode("default")


# ---------------------------------------------------------------- torch.compile(fullgraph=True)

def test_rotary_embedding_compiles_whole_and_keeps_the_triton_op():
    torch._dynamo.reset()
    rot = pl.RotaryEmbedding(128, layout="half").to(CUDA)
    q, k = randn(1, 32, 256, 128, dtype=torch.bfloat16).to(CUDA), randn(1, 8, 256, 128, dtype=torch.bfloat16).to(CUDA)
    compiled = torch.compile(rot, fullgraph=True)
    got, want = compiled(q, k), rot(q, k)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    qq = q.clone().requires_grad_()
    torch.compile(lambda x: rot(x, k)[0].float().square().sum(), fullgraph=True)(qq).backward()
    torch.testing.assert_close(qq.grad, 2 * q, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("mode", ["causal", "symmetric"])
def test_alibi_attention_compiles_whole(mode):
    torch._dynamo.reset()
    q, k, v = (randn(1, 8, 512, 64, dtype=torch.bfloat16, seed=s).to(CUDA) for s in range(3))
    got = torch.compile(lambda a, b, c: pl.alibi_attention(a, b, c, mode=mode), fullgraph=True)(q, k, v)
    torch.testing.assert_close(got, pl.alibi_attention(q, k, v, mode=mode), atol=2e-2, rtol=2e-2)


# ---------------------------------------------------------------- the Triton kernel, compiled

@pytest.fixture
def triton_rope():
    if rotary.triton_rope is None:
        pytest.skip("Triton is not installed with this CUDA torch")
    return rotary.triton_rope


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("dtype", [*DTYPES, torch.float64])
def test_triton_table_path_is_the_cuda_reference_bit_for_bit(triton_rope, dtype, layout):
    """The same tables, the same float32 arithmetic, no FMA, round to nearest even: the same bits."""
    x = randn(2, 8, 300, 96, dtype=dtype).to(CUDA)
    cos, sin = rope_tables(position_angles(x, ints(70000, 300).to(CUDA), RopeOptions()), 1.3)
    assert torch.equal(triton_rope.rotate(x, cos, sin, layout), rotate_in_float32(x, cos, sin, layout))


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_triton_register_path_equals_the_references(triton_rope, dtype, layout):
    """Angles in registers with libdevice's cos/sin: equal to the CUDA reference (which calls the same
    math library) within a float32 ulp, and to the CPU reference within the interpreter tests' bound."""
    q, k = randn(1, 32, 1000, 128, dtype=dtype).to(CUDA), randn(1, 8, 1000, 128, dtype=dtype, seed=1).to(CUDA)
    pos = ints(1 << 17, 1000).to(CUDA)
    got_q, got_k = triton_rope.rope(q, k, positions=pos, inv_freq=pl.rope_frequencies(128, device=CUDA), layout=layout)
    for got, x in ((got_q, q), (got_k, k)):
        want = rotate_at_positions(x, pos, RopeOptions(layout=layout))  # the reference's steps on CUDA
        torch.testing.assert_close(got, want, **TOL[dtype])
        cpu = rotate_at_positions(x.cpu(), pos.cpu(), RopeOptions(layout=layout))
        torch.testing.assert_close(got.cpu(), cpu, **TOL[dtype])


def test_triton_serves_the_issue_shapes_in_one_launch_with_gradients(triton_rope, monkeypatch):
    launches = []
    real = triton_rope._launch
    monkeypatch.setattr(triton_rope, "_launch", lambda *a: launches.append(a[0].shape) or real(*a))
    rot = pl.RotaryEmbedding(128, layout="half").to(CUDA)
    q = randn(1, 32, 4096, 128, dtype=torch.bfloat16).to(CUDA).requires_grad_()
    k = randn(1, 8, 4096, 128, dtype=torch.bfloat16, seed=1).to(CUDA).requires_grad_()
    out_q, out_k = rot(q, k)
    assert len(launches) == 1
    g_q, g_k = torch.autograd.grad((out_q.float() * 2).sum() + out_k.float().sum(), (q, k))
    assert len(launches) == 2  # the backward: one launch for both gradients
    with torch.no_grad():  # R^T applied to the output's gradient, by the reference
        cos, sin = rot.tables(4096)
        want_q = rotate_in_float32(torch.full_like(q, 2.0), cos, -sin, "half")
    torch.testing.assert_close(g_q, want_q, atol=2e-2, rtol=2e-2)
    assert g_k.shape == k.shape


# ---------------------------------------------------------------- FlexAttention

def test_t5_gradients_reach_the_bias_table_through_flex():
    t5 = pl.T5RelativeBias(4, num_buckets=16, max_distance=64).to(CUDA)
    q, k, v = (randn(1, 4, 200, 32, seed=s).to(CUDA) for s in range(3))
    pl.t5_attention(q, k, v, t5).sum().backward()
    fast = t5.embedding.weight.grad.clone()
    t5.embedding.weight.grad = None
    pl.attention(q, k, v, bias=t5(200))[0].sum().backward()
    torch.testing.assert_close(fast, t5.embedding.weight.grad, atol=1e-4, rtol=1e-3)


def test_alibi_attention_never_holds_the_bias():
    """At L = 8192, H = 16 the bf16 (H, L, L) bias alone would be 2 GiB: the peak stays near SDPA's."""
    q, k, v = (randn(1, 16, 8192, 64, dtype=torch.bfloat16, seed=s).to(CUDA) for s in range(3))
    pl.alibi_attention(q, k, v)  # compile first
    torch.cuda.synchronize()

    def peak(fn) -> int:
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        fn()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - base

    sdpa = peak(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True))
    ours = peak(lambda: pl.alibi_attention(q, k, v))
    assert ours <= 1.2 * sdpa + 16 * 2**20, (ours, sdpa)
