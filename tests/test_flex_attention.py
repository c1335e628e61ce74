"""ALiBi, T5 and any bias of j - i through FlexAttention (posenc_lib/kernels/flex.py), checked on the CPU.

FlexAttention runs eagerly on CPU tensors (it materialises the scores there), which is enough to
check the score_mods against the dense references; the ``flex_on_cpu`` fixture sends CPU tensors
through the public functions' GPU branch. Eager FlexAttention applies the mask per score and ignores
the block structure, so the causal block mask is checked on its own against ``create_block_mask``.
On CUDA, tests/test_gpu.py runs the compiled kernel.
"""
import pytest
import torch
from torch.nn.attention.flex_attention import create_block_mask

import posenc_lib as pl
from posenc_lib import fast_attention as fa
from posenc_lib.kernels import flex

TOL = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.bfloat16: dict(atol=2e-2, rtol=2e-2),
       torch.float16: dict(atol=2e-3, rtol=2e-3)}


@pytest.fixture
def flex_on_cpu(monkeypatch):
    """The public functions take their FlexAttention branch for CPU tensors too; records each call."""
    monkeypatch.setattr(flex, "DEVICES", ("cuda", "cpu"))
    calls = []
    real = flex._run
    monkeypatch.setattr(flex, "_run", lambda name, *a: calls.append(name) or real(name, *a))
    return calls


def qkv(h=4, q_len=37, k_len=None, d=16, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    k_len = q_len if k_len is None else k_len
    return tuple(torch.randn(2, h, n, d, generator=g).to(dtype) for n in (q_len, k_len, k_len))


def dense(q, k, v, bias, causal=False):
    """The dense reference in float32: attention with the whole (H, q_len, k_len) bias."""
    return pl.attention(q.float(), k.float(), v.float(), bias=bias, causal=causal)[0].to(q.dtype)


@pytest.mark.parametrize("dtype", list(TOL))
@pytest.mark.parametrize("mode", ["causal", "symmetric"])
@pytest.mark.parametrize("q_len,k_len", [(37, 37), (12, 300), (1, 9)])
def test_alibi_attention_through_flex_equals_dense(flex_on_cpu, mode, q_len, k_len, dtype):
    q, k, v = qkv(q_len=q_len, k_len=k_len, dtype=dtype)
    want = dense(q, k, v, pl.alibi_bias(4, q_len, k_len, mode=mode))
    torch.testing.assert_close(pl.alibi_attention(q, k, v, mode=mode), want, **TOL[dtype])
    assert flex_on_cpu == ["alibi"]


def test_alibi_attention_through_flex_takes_custom_slopes_and_checks_them(flex_on_cpu):
    q, k, v = qkv(h=3)
    slopes = torch.tensor([0.5, 0.1, 0.01])
    want = dense(q, k, v, pl.alibi_bias(3, 37, slopes=slopes))
    torch.testing.assert_close(pl.alibi_attention(q, k, v, slopes=slopes), want, **TOL[torch.float32])
    with pytest.raises(ValueError, match=r"slopes must have shape \(3,\)"):
        pl.alibi_attention(q, k, v, slopes=torch.ones(4))


@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_attention_through_flex_equals_dense(flex_on_cpu, bidirectional):
    t5 = pl.T5RelativeBias(4, bidirectional=bidirectional, num_buckets=8, max_distance=20)
    q, k, v = qkv(q_len=45)
    with torch.no_grad():
        want = dense(q, k, v, t5(45), causal=not bidirectional)
        torch.testing.assert_close(pl.t5_attention(q, k, v, t5), want, **TOL[torch.float32])
    assert flex_on_cpu == ["ramp"]


def test_relative_bias_attention_through_flex_with_queries_last(flex_on_cpu):
    """Any function of j - i, queries the last 20 of 150 keys, causal: the ramp's index arithmetic."""
    w = torch.tensor([0.3, -0.2, 0.1, 0.05])

    def bias_of_offset(rel):
        return -w.view(-1, *[1] * rel.dim()) * rel.clamp(-5, 5).abs()

    q, k, v = qkv(q_len=20, k_len=150)
    for causal in (False, True):
        want = dense(q, k, v, bias_of_offset(pl.relative_positions(20, 150, q_offset=130)), causal=causal)
        torch.testing.assert_close(pl.relative_bias_attention(q, k, v, bias_of_offset, causal=causal), want,
                                   **TOL[torch.float32])


@pytest.mark.parametrize("q_len,k_len", [(1, 1), (5, 5), (128, 128), (129, 129), (300, 300), (12, 300),
                                         (1, 1000), (200, 700), (511, 1025)])
def test_causal_block_mask_is_create_block_masks(q_len, k_len):
    """Built from block indices alone, the tiles are the ones create_block_mask finds by evaluating the
    whole (q_len, k_len) mask: the same partial and full tiles per query block, ragged edges included."""
    off = k_len - q_len
    want = create_block_mask(lambda b, h, i, j: j <= i + off, 1, 1, q_len, k_len, device="cpu")
    got = flex.causal_block_mask(q_len, k_len, torch.device("cpu"))

    def tiles(mask):
        return [[set(idx[0, 0, r, :num[0, 0, r]].tolist()) for r in range(num.shape[-1])]
                for num, idx in ((mask.kv_num_blocks, mask.kv_indices), (mask.full_kv_num_blocks, mask.full_kv_indices))]

    assert tiles(got) == tiles(want)
    assert got.shape[-2:] == (q_len, k_len)


def test_the_flex_branch_builds_nothing_of_size_l_squared(monkeypatch):
    """Outside FlexAttention's own kernel no tensor of H * q_len * k_len elements is made for ALiBi: the bias
    exists only inside the score_mod (the block mask is a few (L/128, L/128) index tensors)."""
    from torch.overrides import TorchFunctionMode

    class Sizes(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.largest = 0

        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, tuple) else (out,):
                if isinstance(t, torch.Tensor):
                    self.largest = max(self.largest, t.numel())
            return out

    monkeypatch.setattr(flex, "DEVICES", ("cuda", "cpu"))
    monkeypatch.setattr(flex, "flex_attention", lambda q, k, v, **kw: torch.zeros_like(q))  # the kernel, stubbed
    q, k, v = qkv(h=4, q_len=300, d=16)
    for mode in ("causal", "symmetric"):
        with Sizes() as sizes:
            pl.alibi_attention(q, k, v, mode=mode)
        assert sizes.largest <= q.numel(), sizes.largest  # the inputs' size; H * L^2 would be 360000


def test_cpu_keeps_the_chunked_sdpa_path(monkeypatch):
    """Without the fixture a CPU tensor never reaches FlexAttention (the CPU path is unchanged); on the
    GPU's side, float64 and head dimensions under 16 (which FlexAttention's kernel lacks) stay off it."""
    calls = []
    monkeypatch.setattr(flex, "_run", lambda *a: calls.append(a))
    q, k, v = qkv()
    pl.alibi_attention(q, k, v)
    pl.t5_attention(q, k, v, pl.T5RelativeBias(4))
    assert calls == [] and flex.DEVICES == ("cuda",)
    monkeypatch.setattr(flex, "DEVICES", ("cuda", "cpu"))
    assert flex.applies(*qkv()) and not flex.applies(*qkv(d=8)) and not flex.applies(*qkv(dtype=torch.float64))



def test_compiled_flex_survives_a_second_length(monkeypatch):
    """torch.compile, as on a GPU, at three lengths: the second call makes torch's shapes dynamic, and an
    offset captured as a Python int then broke inductor's lowering (seen on an H200 with torch 2.11, and
    here on the CPU). The score_mods read their offsets from tensors; each result equals the dense one.
    ALiBi only: the ramp's gather hits a bug of torch 2.13's CPU flex template (an undeclared
    cur_kvSplitSize1 in the generated C++), which the GPU's Triton template does not share."""
    import shutil

    if not (shutil.which("c++") or shutil.which("g++")):
        pytest.skip("torch.compile on the CPU needs a C++ compiler")
    monkeypatch.setattr(flex, "DEVICES", ("cuda", "cpu"))
    monkeypatch.setattr(flex, "_COMPILED", {})

    def compiled(name, fn, q, *args):
        if name not in flex._COMPILED:
            flex._COMPILED[name] = torch.compile(fn)
        return flex._COMPILED[name](q, *args)

    monkeypatch.setattr(flex, "_run", compiled)
    for q_len, k_len in [(40, 40), (3, 70), (17, 17)]:
        q, k, v = qkv(q_len=q_len, k_len=k_len)
        for mode in ("causal", "symmetric"):
            want = dense(q, k, v, pl.alibi_bias(4, q_len, k_len, mode=mode))
            torch.testing.assert_close(pl.alibi_attention(q, k, v, mode=mode), want, **TOL[torch.float32])
    assert set(flex._COMPILED) == {"alibi"}
