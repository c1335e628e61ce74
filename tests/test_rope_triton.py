"""The Triton RoPE kernel (posenc_lib/kernels/triton_rope.py) under Triton's interpreter, on CPU tensors.

No GPU needed: a CPU tensor always runs the kernel interpreted (numpy, one program at a time), so
these tests need no TRITON_INTERPRET and no import order. The ``on_cpu`` fixture also lets
``rotary`` send CPU tensors to the kernel, so the public entry points are tested through the same
dispatch a GPU takes. Tolerances (the kernel's docstring): the table path is the reference's
arithmetic, equal bit for bit; the register path computes cos/sin with numpy's functions instead of
torch's, within ``REGISTER_ULPS`` float32 ulps of max(1, |x|) (measured: 1.03) and, in bfloat16/float16,
one rounding step of the output. tests/test_gpu.py runs the compiled kernel on CUDA.
"""
import math
import shutil
from pathlib import Path

import pytest
import torch

triton = pytest.importorskip("triton", reason="Triton is not installed here (the test lock has it on Linux x86-64 only)")

import posenc_lib as pl  # noqa: E402
from posenc_lib import rotary  # noqa: E402
from posenc_lib.kernels import cpu  # noqa: E402
from posenc_lib.kernels import triton_rope as tr  # noqa: E402
from posenc_lib.rope import RopeOptions, rope_tables, position_angles, rotate_at_positions, rotate_in_float32  # noqa: E402

DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.float64)
LAYOUTS = ("interleaved", "half")
REGISTER_ULPS = 2  # float32 ulps of max(1, |x|) the register path may differ by (numpy's cos/sin vs torch's)


@pytest.fixture
def on_cpu(monkeypatch):
    """rotary sends CPU tensors of any size to the kernel (interpreted), as it sends CUDA tensors on a GPU."""
    monkeypatch.setattr(rotary, "triton_rope", tr)
    monkeypatch.setattr(tr, "DEVICES", ("cuda", "cpu"))
    monkeypatch.setattr(rotary, "SMALL", 0)
    launches = []
    real = tr._launch
    monkeypatch.setattr(tr, "_launch", lambda *a: launches.append(a[0].shape) or real(*a))
    with cpu.use_cpu_kernel(False):
        yield launches


def reference(x, positions=None, **options):
    return rotate_at_positions(x, positions, RopeOptions(**options))


def assert_within_rounding(got, want, x):
    """got is want up to the register path's rounding: a few float32 ulps of the inputs' size, or in a
    half-precision dtype one step of the output's own rounding."""
    assert got.dtype == want.dtype and got.shape == want.shape
    diff = (got.double() - want.double()).abs()
    if got.dtype in (torch.float32, torch.float64):
        eps = torch.finfo(torch.float32).eps if got.dtype == torch.float32 else 1e-12
        bound = REGISTER_ULPS * eps * max(1.0, x.double().abs().max().item())
        assert diff.max().item() <= bound, (diff.max().item(), bound)
    else:
        step = torch.nextafter(want.abs(), torch.tensor(float("inf"), dtype=want.dtype)) - want.abs()
        assert (diff <= step.double()).all(), diff.max().item()


def randn(*shape, dtype=torch.float32, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


# ---------------------------------------------------------------- the kernel against the reference

@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # numpy's inf * 0, as torch's
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_table_path_is_the_reference_bit_for_bit(dtype, layout):
    """Given the reference's cos/sin, every product and difference rounds as torch's: equal bits, NaN and inf too."""
    x = randn(2, 3, 9, 12, dtype=dtype)
    x[0, 0, 0, :2] = torch.tensor([float("nan"), float("inf")])
    cos, sin = rope_tables(position_angles(x, None, RopeOptions()), 1.5)
    got = tr.rotate(x, cos, sin, layout)
    torch.testing.assert_close(got, rotate_in_float32(x, cos, sin, layout), rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_register_path_is_the_reference_within_rounding(dtype, layout):
    """Angles made in the kernel from positions up to 60000 and inv_freq: cos/sin are numpy's, so a few ulps."""
    q, k = randn(2, 4, 9, 16, dtype=dtype), randn(2, 2, 9, 16, dtype=dtype, seed=1)
    pos = torch.randint(0, 60000, (9,), generator=torch.Generator().manual_seed(2))
    inv = pl.rope_frequencies(16, dtype=torch.float64 if dtype == torch.float64 else torch.float32)
    got_q, got_k = tr.rope(q, k, positions=pos, inv_freq=inv, layout=layout)
    assert_within_rounding(got_q, reference(q, pos, layout=layout), q)
    assert_within_rounding(got_k, reference(k, pos, layout=layout), k)


def test_blocks_groups_and_padding_at_the_edges():
    """Several position blocks (a ragged last one), head groups, pairs padded to a power of two (r/2 = 3),
    pass-through features (d - r = 4, padded): the masks and the grid's indexing."""
    q, k = randn(1, 4, 11, 10), randn(1, 2, 11, 10, seed=1)
    cos, sin = rope_tables(position_angles(q, None, RopeOptions(rotary_dim=6)), 1.0)
    for layout in LAYOUTS:
        got_q, got_k = tr.rope(q, k, cos=cos, sin=sin, rotary_dim=6, layout=layout, block_s=4, groups=2)
        assert torch.equal(got_q, reference(q, rotary_dim=6, layout=layout))
        assert torch.equal(got_k, reference(k, rotary_dim=6, layout=layout))


def test_strided_inputs_are_read_through_their_strides():
    """(batch, heads, seq, d) views of (batch, seq, heads, d) activations, and batched positions."""
    q = randn(2, 9, 4, 16).transpose(1, 2)
    k = randn(2, 9, 2, 16, seed=1).transpose(1, 2)
    assert not q.is_contiguous()
    pos = torch.randint(0, 500, (2, 9), generator=torch.Generator().manual_seed(3))
    got_q, got_k = tr.rope(q, k, positions=pos, inv_freq=pl.rope_frequencies(16), layout="half")
    assert_within_rounding(got_q, reference(q, pos, layout="half"), q)
    assert_within_rounding(got_k, reference(k, pos, layout="half"), k)
    assert got_q.is_contiguous()


def test_queries_and_keys_of_different_lengths_share_one_launch(on_cpu):
    """Decoding: one new query against its keys, both starting at the cache offset (as the module rotates them)."""
    rot = pl.RotaryEmbedding(16)
    q, k = randn(1, 4, 1, 16), randn(1, 2, 5, 16, seed=1)
    got_q, got_k = rot(q, k, offset=7)
    assert len(on_cpu) == 1
    assert torch.equal(got_q, reference(q, torch.arange(7, 8)))
    assert torch.equal(got_k, reference(k, torch.arange(7, 12)))


# ---------------------------------------------------------------- through rotary's dispatch

@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("positions", ["none", "1d", "2d"])
def test_apply_rope_takes_the_kernel_with_every_option(on_cpu, layout, positions):
    """apply_rope on the kernel's device: one launch, angles in registers, partial rotary and YaRN's factor."""
    x = randn(2, 3, 9, 12)
    pos = {"none": None, "1d": torch.randint(0, 9000, (9,), generator=torch.Generator().manual_seed(4)),
           "2d": torch.randint(0, 9000, (2, 9), generator=torch.Generator().manual_seed(5))}[positions]
    for options in (dict(layout=layout), dict(layout=layout, rotary_dim=8, attention_factor=1.25, base=500.0),
                    dict(layout=layout, inv_freq=pl.rope_frequencies(12, base=7.0))):
        assert_within_rounding(pl.apply_rope(x, pos, **options), reference(x, pos, **options), x)
    assert len(on_cpu) == 3


@pytest.mark.parametrize("shape", [(5, 4), (3, 5, 8), (1, 3, 6, 16)])
def test_the_chapters_sizes(on_cpu, shape):
    """The worked examples' shapes: a bare (seq, d), (heads, seq, d), 3 heads; d = 4 has a single pair per half."""
    x = randn(*shape)
    for layout in LAYOUTS:
        assert_within_rounding(pl.apply_rope(x, layout=layout), reference(x, layout=layout), x)


def test_rotary_module_rotates_q_and_k_in_one_launch_from_its_cache(on_cpu):
    """GQA (4 query heads, 2 key heads): one launch reading the cache rows, the reference's bits."""
    rot = pl.RotaryEmbedding(12, layout="half", rotary_dim=8, attention_factor=1.1)
    q, k = randn(2, 4, 9, 12, dtype=torch.bfloat16), randn(2, 2, 9, 12, dtype=torch.bfloat16, seed=1)
    got_q, got_k = rot(q, k, offset=3)
    assert len(on_cpu) == 1
    want = dict(layout="half", rotary_dim=8, attention_factor=1.1)
    assert torch.equal(got_q, reference(q, torch.arange(3, 12), **want))
    assert torch.equal(got_k, reference(k, torch.arange(3, 12), **want))
    pos = torch.randint(0, 90, (2, 9), generator=torch.Generator().manual_seed(6))  # explicit: registers
    got_q, got_k = rot(q, k, pos)
    assert len(on_cpu) == 2
    assert_within_rounding(got_q, reference(q, pos, **want), q)
    assert_within_rounding(got_k, reference(k, pos, **want), k)


def test_gradients_through_x_and_not_through_inv_freq(on_cpu):
    """x requiring grad stays on the kernel (its backward is the kernel); inv_freq requiring grad does not."""
    x = randn(2, 3, 9, 8).requires_grad_()
    pl.apply_rope(x, layout="half").pow(2).sum().backward()
    torch.testing.assert_close(x.grad, 2 * x.detach())  # |R x|^2 = |x|^2
    assert len(on_cpu) == 2  # forward and backward
    inv = pl.rope_frequencies(8).requires_grad_()
    pl.apply_rope(x, inv_freq=inv).sum().backward()
    assert inv.grad is not None and len(on_cpu) == 2  # the reference served it


# ---------------------------------------------------------------- the operator: backward, fake, compile

@pytest.mark.parametrize("tables", [True, False])
def test_backward_is_the_inverse_rotation_gradcheck(tables):
    """gradcheck in float64 (the interpreter has float64): partial rotary, GQA, attention factor."""
    q = randn(1, 2, 3, 6, dtype=torch.float64).requires_grad_()
    k = randn(1, 1, 3, 6, dtype=torch.float64, seed=1).requires_grad_()
    pos = torch.tensor([1, 700, 3])
    inv = pl.rope_frequencies(4, dtype=torch.float64)
    if tables:
        cos, sin = rope_tables(position_angles(q, pos, RopeOptions(rotary_dim=4)), 1.25)
        args = (cos, sin, None, None, 0, 4, 1.0)
    else:
        args = (None, None, pos, inv, 0, 4, 1.25)
    assert torch.autograd.gradcheck(lambda a, b: tr.rope_triton(a, b, *args, False, False), (q, k), fast_mode=True)


def test_operator_registration_opcheck():
    """torch.library.opcheck: schema, fake (meta) implementation and autograd agree with the kernel."""
    q, k = randn(1, 2, 3, 6, dtype=torch.float64), randn(1, 1, 3, 6, dtype=torch.float64, seed=1)
    torch.library.opcheck(tr.rope_triton, (q, k, None, None, torch.tensor([1, 7, 3]),
                                           pl.rope_frequencies(4, dtype=torch.float64), 0, 4, 1.25, False, False))


def test_meta_tensors_get_shapes_from_the_fake_implementation():
    q, k = torch.empty(2, 8, 5, 16, device="meta"), torch.empty(2, 2, 5, 16, device="meta")
    out_q, out_k = tr.rope(q, k, inv_freq=torch.empty(8, device="meta"))
    assert out_q.shape == q.shape and out_k.shape == k.shape and out_q.device.type == "meta"


def test_torch_compile_keeps_the_operator_in_one_graph(on_cpu):
    """fullgraph=True traces rotary's dispatch and the module's cache: the graph calls posenc.rope_triton."""
    seen = []

    def record(gm, example_inputs):
        seen.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm

    torch._dynamo.reset()
    rot = pl.RotaryEmbedding(16, layout="half")
    q, k = randn(1, 4, 9, 16), randn(1, 2, 9, 16, seed=1)
    got = torch.compile(rot, fullgraph=True, backend=record)(q, k)
    assert "posenc.rope_triton.default" in seen
    want = rot(q, k)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


@pytest.mark.parametrize("seq,hq,hk", [(4096, 32, 8), (16384, 32, 8), (65536, 32, 8), (1, 32, 8), (9, 3, 1),
                                        (300, 8, None)])
def test_launch_shape_covers_every_head_and_fills_the_gpu(seq, hq, hk):
    """On a GPU (132 multiprocessors assumed off CUDA): groups divide both head counts, and are 1 (one
    program covers every head, cos/sin made once per position) unless even 2 positions per program leave
    fewer than 4 programs per multiprocessor; the grid then has that many, or all the heads are split."""
    q = torch.empty(1, hq, seq, 128, device="meta")
    k = None if hk is None else torch.empty(1, hk, seq, 128, device="meta")
    block_s, groups, warps = tr.launch_shape(q, k, interpret=False)
    programs = -(-seq // block_s) * groups
    assert block_s in (2, 4, 8, 16) and 1 <= warps <= 4
    assert hq % groups == 0 and (hk or 0) % groups == 0
    assert programs >= 4 * 132 or block_s == 2 and groups == (hq if hk is None else math.gcd(hq, hk))
    assert groups == 1 or block_s == 2
    assert tr.launch_shape(q, k, interpret=True)[1] == 1


# ---------------------------------------------------------------- the compiled form, without a GPU

def test_the_kernel_compiles_for_an_h100_without_one():
    """Triton compiles the GPU form with its own ptxas, no driver needed: libdevice's cos/sin (no
    approximations, no flushed denormals), no fused multiply-add in the rotation, 16-byte loads and stores."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    ptxas = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    if not ptxas.exists() and shutil.which("ptxas") is None:
        pytest.skip("this Triton has no ptxas to compile with")
    fn = tr.kernel(interpret=False)
    pointers = {n: "*bf16" for n in ("q_ptr", "k_ptr", "qo_ptr", "ko_ptr", "cos_ptr", "sin_ptr")}
    pointers.update(pos_ptr="*i64", inv_ptr="*fp32")
    ints = [n for n in fn.arg_names if n not in pointers and n not in ("factor_hi", "factor_lo", "sign")]
    consts = dict(D=128, R=96, HALF=64, PASS=32, HQ=4, HK=1, GROUPS=8, BLOCK_S=16, INTERLEAVED=False, TABLES=False,
                  HAS_POS=True, SCALED=True, ANGLE_F64=False, WORK_F64=False, OUT_BF16=True, LIBDEVICE=True)
    signature = {**pointers, **{n: "i32" for n in ints if n not in consts}, **{n: "fp32" for n in
                 ("factor_hi", "factor_lo", "sign")}, **{n: "constexpr" for n in consts}}
    aligned = [n for n in fn.arg_names if n.endswith(("_ptr", "_sb", "_sh", "_ss"))]  # what a launch specialises
    attrs = {(fn.arg_names.index(n),): [["tt.divisibility", 16]] for n in aligned}
    compiled = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=consts, attrs=attrs),
                              target=GPUTarget("cuda", 90, 32), options=tr._compile_options(4))
    ptx = compiled.asm["ptx"]
    assert "__nv_cosf" in ptx and "__nv_sinf" in ptx and ".approx" not in ptx and ".ftz" not in ptx
    assert "fma.rn.f32" not in ptx.split("__nv_sinf.exit")[-1]  # after the math library: plain mul/sub/add
    assert "ld.global.v4.b32" in ptx and "st.global.v4.b32" in ptx
