"""ALiBi (Press et al. 2022): no position vectors, just a linear penalty on distance.

Head h adds -m_h * (i - j) to the score of query i and key j. The slopes m_h form a
geometric sequence, so some heads look far and some look near.
Variants: the encoder (symmetric) form -m_h |i - j|, a "nonsymmetric" form where half
the heads look left and half look right, and a learned two-sided form with separate
left and right slopes per head (``LearnedALiBi``).
Names: num_heads = H, q_len, k_len.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from . import _validate as v
from .device import moved
from .relative import relative_positions

MODES = ("causal", "symmetric", "nonsymmetric")


def _geometric_slopes(n: int) -> list[float]:
    # For n a power of two: 2**(-8/n), 2**(-16/n), ..., 2**(-8) (ratio = first term).
    return [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]


def alibi_slopes(
    num_heads: int, *, device: torch.device | str | None = None, dtype: torch.dtype = torch.float32
) -> Tensor:
    """Press et al.'s head slopes.

    For H = 2**a heads: m_h = 2**(-8h/H), h = 1..H (the paper, section 3). For other H,
    the recipe of the paper's reference code (``get_slopes``; the paper's text states only
    the power-of-two rule), which BLOOM, MPT and Falcon follow: take the 2**floor(log2 H)
    slopes of the nearest smaller power of two, then fill up with every other slope of the
    next power of two (the first one steeper than all, the rest in between).
    returns: (H,)
    Taught in: notebooks/06_alibi.ipynb
    """
    num_heads = v.int_at_least("num_heads", num_heads, 1)
    closest = 2 ** math.floor(math.log2(num_heads))
    slopes = _geometric_slopes(closest)
    slopes += _geometric_slopes(2 * closest)[0::2][: num_heads - closest]
    # Made on the CPU (Python's float64 powers, rounded once) and moved without waiting on the device.
    return moved(torch.tensor(slopes, dtype=dtype), device)


def alibi_bias(
    num_heads: int,
    q_len: int,
    k_len: int | None = None,
    *,
    mode: str = "causal",
    slopes: Tensor | None = None,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    """The additive attention bias of ALiBi.

    mode "causal":       -m_h * (i - j) for j <= i, -inf for j > i (decoders)
         "symmetric":    -m_h * |i - j| (the encoder form, ALiBi repo issue #5)
         "nonsymmetric": the first H/2 heads look only left (causal), the other H/2
                         only right; both halves share the slopes of H/2 heads
                         (H must be even)
    When q_len < k_len the queries are the *last* q_len positions (generation with
    a key/value cache), so query i sits at position k_len - q_len + i.
    slopes: optional (H,) slopes to use instead of ``alibi_slopes`` (e.g. learned)
    returns: (H, q_len, k_len)
    Taught in: notebooks/06_alibi.ipynb
    """
    num_heads = v.int_at_least("num_heads", num_heads, 1)
    q_len = v.int_at_least("q_len", q_len, 0)
    k_len = q_len if k_len is None else v.int_at_least("k_len", k_len, 0)
    mode = v.one_of("mode", mode, MODES)
    if k_len < q_len:
        raise ValueError(f"k_len must be >= q_len={q_len} (queries are the last positions), got {k_len}")
    if slopes is None:
        if mode == "nonsymmetric":
            if num_heads % 2:
                raise ValueError(f"num_heads must be even for mode='nonsymmetric', got {num_heads}")
            slopes = alibi_slopes(num_heads // 2, device=device, dtype=dtype).repeat(2)
        else:
            slopes = alibi_slopes(num_heads, device=device, dtype=dtype)
    elif slopes.shape != (num_heads,):
        raise ValueError(f"slopes must have shape ({num_heads},), got {tuple(slopes.shape)}")
    rel = relative_positions(q_len, k_len, q_offset=k_len - q_len, device=slopes.device)  # j - i
    # -|j - i| as an integer first: -0.0 never appears on the diagonal.
    bias = slopes.view(-1, 1, 1) * (-rel.abs()).to(slopes.dtype)
    if mode == "causal":
        return bias.masked_fill(rel > 0, float("-inf"))
    if mode == "nonsymmetric":
        half = num_heads // 2
        look_right = torch.arange(num_heads, device=slopes.device).view(-1, 1, 1) >= half
        hidden = torch.where(look_right, rel < 0, rel > 0)
        return bias.masked_fill(hidden, float("-inf"))
    return bias


class ALiBi(nn.Module):
    """ALiBi as a module: forward(q_len, k_len=None) -> (H, q_len, k_len) bias.

    The slopes are a non-persistent buffer (they follow ``.to(device)``).
    Taught in: notebooks/06_alibi.ipynb
    """

    def __init__(self, num_heads: int, *, mode: str = "causal"):
        super().__init__()
        self.num_heads = v.int_at_least("num_heads", num_heads, 1)
        self.mode = v.one_of("mode", mode, MODES)
        slopes = alibi_slopes(num_heads)
        if mode == "nonsymmetric":
            alibi_bias(num_heads, 0, mode=mode)  # validates evenness early
            slopes = alibi_slopes(num_heads // 2).repeat(2)
        self.register_buffer("slopes", slopes, persistent=False)

    def forward(self, q_len: int, k_len: int | None = None) -> Tensor:
        return alibi_bias(self.num_heads, q_len, k_len, mode=self.mode, slopes=self.slopes)


def alibi_bias_two_sided(slopes_left: Tensor, slopes_right: Tensor, q_len: int, k_len: int | None = None) -> Tensor:
    """ALiBi with its own slope on each side of the diagonal (nothing is masked).

    out[h, i, j] = -slopes_left[h] * (i - j)   for keys at or before the query (j <= i)
                   -slopes_right[h] * (j - i)  for keys after the query (j > i)
    The diagonal is 0 whatever the slopes, so each slope only gets gradient from its
    own side. Equal slopes give ``alibi_bias(..., mode="symmetric")``.
    slopes_left, slopes_right: (H,) positive slopes (same device and dtype)
    returns: (H, q_len, k_len), on the slopes' device and dtype
    Taught in: notebooks/06_alibi.ipynb
    """
    v.floating_vector("slopes_left", slopes_left)
    v.floating_vector("slopes_right", slopes_right)
    if slopes_right.shape != slopes_left.shape:
        raise ValueError(f"slopes_right must have shape {tuple(slopes_left.shape)} like slopes_left, got {tuple(slopes_right.shape)}")
    num_heads = v.int_at_least("num_heads (len(slopes_left))", slopes_left.shape[0], 1)
    left = alibi_bias(num_heads, q_len, k_len, mode="symmetric", slopes=slopes_left)
    right = alibi_bias(num_heads, q_len, k_len, mode="symmetric", slopes=slopes_right)
    q_len, k_len = left.shape[-2:]
    rel = relative_positions(q_len, k_len, q_offset=k_len - q_len, device=slopes_left.device)  # j - i
    # torch.where, not triu + tril: it also works when q_len < k_len (queries are the last rows).
    return torch.where(rel > 0, right, left)


class LearnedALiBi(nn.Module):
    """Two-sided ALiBi with learned slopes, the "nonsymmetric with no mask" encoder variant.

    Parameters ``slopes_left`` and ``slopes_right`` (H,) are unconstrained; the slopes
    used are m = sigmoid(parameter), in (0, 1), and the bias is
    ``alibi_bias_two_sided(m_left, m_right, ...)`` = -m |i - j| on each side.
    (The source stores -sigmoid(parameter) and multiplies by |i - j|: the same bias.)
    Init as in the source: parameters ~ normal(mean=-2, std=1), so the slopes start
    near sigmoid(-2) = 0.12 (one std: 0.05 .. 0.27).
    The bias is rebuilt from the parameters on every forward, so it follows training.
    forward(q_len, k_len=None) -> (H, q_len, k_len)
    Taught in: notebooks/06_alibi.ipynb
    """

    def __init__(self, num_heads: int, *, init_mean: float = -2.0, init_std: float = 1.0,
                 device: torch.device | str | None = None, dtype: torch.dtype = torch.float32):
        super().__init__()
        self.num_heads = v.int_at_least("num_heads", num_heads, 1)
        self.init_std = v.finite_number("init_std", init_std, at_least=0)
        self.init_mean = v.finite_number("init_mean", init_mean)
        # torch.empty + an explicit init (not torch.Tensor(n), whose contents are garbage until set).
        self.slopes_left = nn.Parameter(torch.empty(num_heads, device=device, dtype=dtype))
        self.slopes_right = nn.Parameter(torch.empty(num_heads, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.normal_(self.slopes_left, self.init_mean, self.init_std)
        nn.init.normal_(self.slopes_right, self.init_mean, self.init_std)

    def slopes(self) -> tuple[Tensor, Tensor]:
        """The positive slopes in use, (m_left, m_right), each (H,)."""
        return torch.sigmoid(self.slopes_left), torch.sigmoid(self.slopes_right)

    def forward(self, q_len: int, k_len: int | None = None) -> Tensor:
        return alibi_bias_two_sided(*self.slopes(), q_len, k_len)
