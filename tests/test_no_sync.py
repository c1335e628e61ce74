"""No public forward function waits on the host: the sync spy, run without a GPU.

On a GPU, reading a value back (``.item()``, ``if tensor:``, ``.tolist()``, ``nonzero``, a boolean
mask as an index) or a blocking copy from the CPU stalls the stream until every queued kernel is
done. The spy is a ``TorchFunctionMode`` that records every torch call a function makes; each
public forward function runs on the meta device, where a tensor has a shape and no values, so a
CPU tensor copied in shows up as a copy to another device. ``diagnose_rope``'s probes are excepted:
they compare numbers on purpose. On a GPU, tests/test_gpu.py checks the same functions with
``torch.cuda.set_sync_debug_mode("error")``.
"""
from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
from torch.overrides import TorchFunctionMode

import posenc_lib as pl

META = torch.device("meta")
READS = {"item", "tolist", "cpu", "numpy", "__bool__", "__int__", "__index__", "__float__", "nonzero",
         "argwhere", "masked_select", "nonzero_static", "unique", "_local_scalar_dense"}


def _on_cpu(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.device.type == "cpu"


def _bool_index(index: Any) -> bool:
    parts = index if isinstance(index, tuple) else (index,)
    return any(isinstance(p, torch.Tensor) and p.dtype == torch.bool for p in parts)


class SyncSpy(TorchFunctionMode):
    """Records every torch function called, and the calls that would synchronise on a GPU."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []
        self.syncs: list[str] = []

    def __torch_function__(self, func: Callable, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", str(func))
        self.names.append(name)
        on_device = bool(args) and isinstance(args[0], torch.Tensor) and not _on_cpu(args[0])
        if name in READS and on_device:  # the same read of a CPU tensor waits on nothing
            self.syncs.append(name)
        elif name in ("__getitem__", "__setitem__", "index_put_", "index_put") and on_device and len(args) > 1 \
                and _bool_index(args[1]):
            self.syncs.append(f"boolean-mask {name}")
        elif name == "to" and on_device and _to_device(args[1:], kwargs) == "cpu":
            self.syncs.append("copy to the CPU (to)")
        elif name in ("to", "copy_", "cuda") and args and _on_cpu(args[0]) and not kwargs.get("non_blocking") \
                and _to_device(args[1:], kwargs) not in (None, "cpu"):
            self.syncs.append(f"blocking copy from the CPU ({name})")
        elif name == "copy_" and len(args) > 1 and _on_cpu(args[1]) and not _on_cpu(args[0]) \
                and not kwargs.get("non_blocking"):
            self.syncs.append("blocking copy from the CPU (copy_)")
        elif name in ("tensor", "as_tensor") and kwargs.get("device") is not None \
                and torch.device(kwargs["device"]).type != "cpu":
            self.syncs.append(f"torch.{name}(..., device=...) (a copy from the CPU)")
        return func(*args, **kwargs)


def _to_device(args: tuple, kwargs: dict) -> str | None:
    for a in (*args, kwargs.get("device")):
        if isinstance(a, (str, torch.device)):
            return torch.device(a).type
        if isinstance(a, torch.Tensor):
            return a.device.type
    return None


def meta(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.empty(*shape, device=META, dtype=dtype)


def meta_ints(*shape: int) -> torch.Tensor:
    return torch.empty(*shape, device=META, dtype=torch.long)


def _decoder(method: str) -> Callable[[], Any]:
    torch.manual_seed(0)
    model = pl.TinyDecoder(vocab_size=16, d_model=32, num_heads=2, num_layers=2, d_ff=32, max_len=64,
                           positional=method).to(META)

    def run() -> None:
        model(meta_ints(2, 12))
        cache = pl.KVCache()
        model(meta_ints(2, 5), cache=cache)  # the prompt
        for _ in range(3):
            model(meta_ints(2, 1), cache=cache)  # one token at a time
    return run


def _rotary_module() -> Callable[[], Any]:
    rot = pl.RotaryEmbedding(16, layout="half").to(META)
    q, k = meta(1, 4, 33, 16), meta(1, 2, 33, 16)

    def run() -> None:
        rot(q, k)  # grows the cache
        rot(q, k)  # reads it
        rot(q[..., :1, :], k[..., :1, :], offset=40)  # grows again
        rot(q, k, meta_ints(33))  # explicit positions
    return run


def _t5() -> Callable[[], Any]:
    t5 = pl.T5RelativeBias(2, num_buckets=8, max_distance=16).to(META)
    q = meta(1, 2, 9, 8)
    return lambda: (pl.t5_attention(q, q, q, t5), pl.t5_attention(q, q, q, t5, causal=False), t5(9, 9))


def _cope() -> Callable[[], Any]:
    cope = pl.CoPE(8, 16).to(META)
    return lambda: cope(meta(1, 2, 7, 16), meta(1, 2, 7, 7))


def _alibi_module() -> Callable[[], Any]:
    alibi = pl.ALiBi(4).to(META)
    return lambda: alibi(9)


def _built(make: Callable[[], torch.nn.Module], call: Callable[[Any], Any]) -> Callable[[], Callable[[], Any]]:
    """A module made on the CPU and moved to meta outside the spy; only ``call(module)`` is spied on."""
    def build() -> Callable[[], Any]:
        module = make().to(META)
        return lambda: call(module)
    return build


def _just(run: Callable[[], Any]) -> Callable[[], Callable[[], Any]]:
    return lambda: run


# name -> a builder (run outside the spy: modules are made on the CPU and moved, as a user does)
# that returns the forward calls to spy on.
FORWARDS: dict[str, Callable[[], Callable[[], Any]]] = {
    "apply_rope": _just(lambda: pl.apply_rope(meta(1, 2, 9, 16), meta_ints(9))),
    "apply_rope batched positions": _just(lambda: pl.apply_rope(meta(2, 2, 9, 16), meta_ints(2, 9))),
    "RotaryEmbedding": _rotary_module,
    "alibi_attention causal": _just(lambda: pl.alibi_attention(meta(1, 4, 9, 8), meta(1, 4, 9, 8), meta(1, 4, 9, 8))),
    "alibi_attention symmetric": _just(lambda: pl.alibi_attention(meta(1, 3, 9, 8), meta(1, 3, 9, 8),
                                                                   meta(1, 3, 9, 8), mode="symmetric")),
    "alibi_attention slopes": _just(lambda: pl.alibi_attention(meta(1, 4, 3, 8), meta(1, 4, 9, 8), meta(1, 4, 9, 8),
                                                                slopes=meta(4))),
    "ALiBi module": _alibi_module,
    "alibi_bias": _just(lambda: pl.alibi_bias(4, 9, device=META)),
    "t5_attention": _t5,
    "toeplitz_attention": _just(lambda: pl.toeplitz_attention(meta(1, 2, 9, 8), meta(1, 2, 9, 8), meta(1, 2, 9, 8),
                                                              meta(2, 17), causal=True)),
    "apply_rope_nd contiguous": _just(lambda: pl.apply_rope_nd(meta(1, 2, 9, 16), meta_ints(9, 3),
                                                               sections=(2, 3, 3))),
    "apply_rope_nd interleaved": _just(lambda: pl.apply_rope_nd(meta(1, 2, 9, 24), meta_ints(9, 3),
                                                                sections=(4, 4, 4), section_style="interleaved")),
    "apply_rope_nd axial": _just(lambda: pl.apply_rope_nd(meta(2, 2, 9, 16), meta_ints(2, 9, 2), sections=(4, 4),
                                                          section_style="axial", layout="half")),
    "apply_rope_2d": _just(lambda: pl.apply_rope_2d(meta(1, 2, 12, 16), *pl.axial_positions(3, 4, device=META))),
    "CoPE": _cope,
    "attention": _just(lambda: pl.attention(meta(1, 2, 5, 8), meta(1, 2, 5, 8), meta(1, 2, 5, 8),
                                            bias=pl.alibi_bias(2, 5, device=META))),
    "causal_linear_attention": _just(lambda: pl.causal_linear_attention(meta(2, 5, 4), meta(2, 5, 4), meta(2, 5, 3),
                                                                        decay=meta(2, 1, 1))),
    "shaw_attention": _built(lambda: pl.ShawRelativePositions(d=4, max_distance=3),
                             lambda shaw: pl.shaw_attention(meta(5, 4), meta(5, 4), meta(5, 4), *shaw(5))),
    "LearnedALiBi": _built(lambda: pl.LearnedALiBi(4), lambda m: m(7)),
    "SinusoidalPositionalEncoding": _built(lambda: pl.SinusoidalPositionalEncoding(8, 16),
                                           lambda m: m(meta(2, 6, 8), offset=3)),
    "LearnedPositionalEncoding": _built(lambda: pl.LearnedPositionalEncoding(max_len=16, d=8),
                                        lambda m: m(meta(2, 6, 8), offset=3)),
    **{f"TinyDecoder {m}": (lambda m=m: _decoder(m)) for m in pl.POSITIONAL_METHODS},
}


@pytest.mark.parametrize("name", list(FORWARDS))
def test_public_forward_never_synchronises(name):
    run = FORWARDS[name]()
    with SyncSpy() as spy:
        run()
    assert spy.names, "the spy saw nothing: it would not catch a sync either"
    assert not spy.syncs, f"{name} would wait on the host: {sorted(set(spy.syncs))}"


@pytest.mark.parametrize("sync, caught", [
    (lambda x: x.sum().item(), "item"),
    (lambda x: x.tolist(), "tolist"),
    (lambda x: bool(x.sum() > 0), "__bool__"),
    (lambda x: int(x.sum()), "__int__"),
    (lambda x: float(x.sum()), "__float__"),
    (lambda x: range(10)[x.sum().long()], "__index__"),
    (lambda x: x.nonzero(), "nonzero"),
    (lambda x: x[x > 0], "boolean-mask __getitem__"),
    (lambda x: x.cpu(), "cpu"),
    (lambda x: x.to("cpu"), "copy to the CPU (to)"),
    (lambda x: torch.tensor([1.0, 2.0]).to(x.device), "blocking copy from the CPU (to)"),
    (lambda x: torch.tensor([1.0, 2.0], device=x.device), "torch.tensor(..., device=...) (a copy from the CPU)"),
])
def test_the_spy_catches_each_kind_of_sync(sync, caught):
    """Each read the spy looks for, done on purpose on a device tensor, is seen; the same on a CPU tensor is not."""
    with SyncSpy() as spy:
        try:
            sync(torch.empty(4, device=META))
        except Exception:  # noqa: BLE001  meta has no values to hand out: it raises after the spy saw the call
            pass
    assert caught in spy.syncs
    if "from the CPU" not in caught:
        with SyncSpy() as spy:
            sync(torch.randn(4))
        assert not spy.syncs


def test_the_spy_catches_an_item_added_inside_alibi_attention(monkeypatch):
    """A .item() slipped into alibi_attention's path is caught (the issue's acceptance check)."""
    from posenc_lib import fast_attention

    original = fast_attention.alibi_ramp

    def with_item(*args, **kwargs):
        ramp = original(*args, **kwargs)
        ramp.max().item()
        return ramp

    monkeypatch.setattr(fast_attention, "alibi_ramp", with_item)
    run = FORWARDS["alibi_attention causal"]()
    with SyncSpy() as spy, pytest.raises(Exception):  # noqa: B017  meta refuses the value after the spy saw it
        run()
    assert "item" in spy.syncs
