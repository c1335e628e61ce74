"""How every exercise checker reports: it says what is right or wrong, never the expected answer.

Self-study (the default): a checker prints its verdict and returns True, False or None.
Grading (``POSENC_GRADING=1`` in the environment, as under ``nbgrader autograde``): a wrong
or unattempted answer raises ``AssertionError`` with the same text instead, because an
autograder gives a test cell its points unless the cell raises.
"""
from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any, Callable, Iterable

if TYPE_CHECKING:
    import torch

Verdict = tuple[bool, str]

GRADING_ENV = "POSENC_GRADING"
_ON, _OFF = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


def grading() -> bool:
    """True when ``POSENC_GRADING`` asks checkers to raise (read on every call, so tests can set it)."""
    value = os.environ.get(GRADING_ENV, "").strip().lower()
    if value not in _ON + _OFF:
        raise ValueError(f"{GRADING_ENV} must be 1 (grading: checkers raise) or 0 (self-study: they print), "
                         f"got {value!r}")
    return value in _ON


def not_attempted(answer: Any) -> bool:
    """An untouched exercise: the answer is still None / ... ."""
    return answer is None or answer is Ellipsis


def _verdict(answer: Any, run: Callable[[Any], Iterable[Verdict]], hint: str, lines: list[str]) -> bool | None:
    """Append one line per verdict (and the hint when something is wrong) to ``lines``."""
    if not_attempted(answer):
        lines.append("  … not attempted yet: write your answer in the cell above, run it, then run this cell.")
        return None
    try:
        verdicts = list(run(answer))
    except NotImplementedError:
        lines.append("  … not attempted yet: your function still raises NotImplementedError.")
        return None
    except Exception as e:  # a learner's bug is feedback, not a crash
        lines += [f"  ✗ your answer raised {type(e).__name__}: {e}", *([f"  hint: {hint}"] if hint else [])]
        return False
    lines += [f"  {'✓' if ok else '✗'} {message}" for ok, message in verdicts]
    ok = all(ok for ok, _ in verdicts)
    if ok or hint:  # an empty hint: the checker gives its hints with the verdicts they belong to
        lines.append("  all correct!" if ok else f"  hint: {hint}")
    return ok


def report(title: str, answer: Any, run: Callable[[Any], Iterable[Verdict]], hint: str) -> bool | None:
    """Run ``run(answer)`` and report one line per verdict, plus the hint when something is wrong.

    hint: printed on any wrong answer; "" when a hint fits only some mistakes, which ``run`` then names in the
    verdicts it belongs to.

    returns: True (all right), False (something wrong) or None (not attempted yet).
    A learner's function that raises NotImplementedError counts as not attempted; any other
    exception is reported. Under grading (see ``grading``) anything but True raises
    AssertionError carrying the text that self-study prints.
    """
    lines = [f"Exercise: {title}"]
    ok = _verdict(answer, run, hint, lines)
    text = "\n".join(lines)
    if ok is not True and grading():
        raise AssertionError(text)
    print(text)
    return ok


def float64_tensor(x: Any) -> "torch.Tensor | None":
    """x (a number, a nested list, a numpy array or a tensor) as a float64 tensor, or None if it is none of these."""
    import torch

    try:
        return torch.as_tensor(x, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        return None


def close(a: Any, b: Any, atol: float = 1e-4, rtol: float = 0.0) -> bool:
    """The one closeness rule of every checker: same shape, and |a - b| <= atol + rtol |b| everywhere.

    a, b: numbers, nested lists, numpy arrays or tensors (compared in float64); NaN equals NaN.
    """
    import torch

    ta, tb = float64_tensor(a), float64_tensor(b)
    if ta is None or tb is None:
        return False
    return ta.shape == tb.shape and bool(torch.allclose(ta, tb, atol=atol, rtol=rtol, equal_nan=True))


def number(x: Any) -> int | float | None:
    """The one rule for a numeric answer: x as a Python int or float, or None when x is not one real number.

    Accepted: an int, a float, a numpy scalar, or a tensor, array, list or tuple holding exactly
    one of these (0-d or one element). Not: a bool, a string, a complex number, or more than one value.
    """
    if isinstance(x, (bool, str, bytes, type)):  # a class (torch.Tensor) has .item too, unbound
        return None
    if isinstance(x, (list, tuple)):
        return number(x[0]) if len(x) == 1 else None
    if hasattr(x, "item"):  # tensors, numpy arrays and scalars: .item() raises unless there is exactly one value
        try:
            x = x.item()
        except (ValueError, RuntimeError):
            return None
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return x


def whole_number(x: Any) -> int | None:
    """The one rule for a whole-number answer: x as an int, or None when x is not one whole number.

    Accepted: what ``number`` accepts, when its value is integral: 3, 3.0, numpy.int64(3),
    torch.tensor(3), [3]. Not: 3.5, inf, NaN, a bool, a string or several values.
    """
    value = number(x)
    if value is None or (isinstance(value, float) and not (math.isfinite(value) and value.is_integer())):
        return None
    return int(value)


def whole_numbers(xs: Any) -> list[int] | None:
    """A list, tuple or set of whole numbers (``whole_number``), or a 1-D tensor or array of them, as
    a list of ints (in the container's order); None when xs is not such a collection."""
    if getattr(xs, "ndim", None) == 1 and hasattr(xs, "tolist"):
        xs = xs.tolist()
    if not isinstance(xs, (list, tuple, set, frozenset)):
        return None
    out = [whole_number(x) for x in xs]
    return None if any(n is None for n in out) else out  # type: ignore[return-value]


# ---------------------------------------------------------------- sealed answers
# A checker that needs the answer itself (a count, a short list, a set of names) keeps a salted digest
# of it, never the answer or the code that computes it: importing the checker hands nothing over, and
# the salt (the exercise's name) makes one exercise's digest useless for another. Misconceptions are
# sealed the same way, so the checker can name a wrong answer it expects without printing the right one.

def canonical(value: Any) -> str | None:
    """One text per answer, whatever type carries it, or None for a value that is no such answer.

    whole numbers (``whole_number``: 3, 3.0, tensor(3), [3] is a list) -> "3"; strings -> stripped,
    lower case; lists and tuples -> "[a,b]" in order; sets and frozensets -> "{a,b}" sorted;
    a 1-D tensor or array -> as a list.
    """
    if isinstance(value, str):
        return repr(value.strip().lower())
    if isinstance(value, (set, frozenset)):
        items = [canonical(x) for x in value]
        return None if None in items else "{" + ",".join(sorted(items)) + "}"  # type: ignore[arg-type]
    if getattr(value, "ndim", None) == 1 and hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        items = [canonical(x) for x in value]
        return None if None in items else "[" + ",".join(items) + "]"  # type: ignore[arg-type]
    n = whole_number(value)
    return None if n is None else str(n)


def sealed(value: Any, exercise: str) -> str | None:
    """The salted digest a checker stores for ``value`` (``canonical``) in ``exercise``; None if not an answer."""
    import hashlib

    text = canonical(value)
    if text is None:
        return None
    return hashlib.sha256(f"posenc/{exercise}/{text}".encode()).hexdigest()[:24]


# A real-number answer is sealed at a fixed number of decimals. Rounding puts a value near a boundary on
# either side of it, so a checker accepts the sealed rounding and one step either way: a tolerance of
# 1 to 1.5 units of the last decimal, without the checker holding the number.

def sealed_number(value: Any, exercise: str, places: int = 3) -> str | None:
    """The salted digest of ``value`` (``number``) rounded to ``places`` decimals; None if it is no finite number."""
    x = number(value)
    if x is None or not math.isfinite(x):
        return None
    return sealed(round(x * 10**places), f"{exercise}/{places}")


def near_sealed(value: Any, digest: str, exercise: str, places: int = 3) -> bool:
    """True when ``value`` rounded to ``places`` decimals, or one step of that rounding either way, seals to
    ``digest`` (made by ``sealed_number`` with the same exercise and places)."""
    x = number(value)
    if x is None or not math.isfinite(x):
        return False
    k = round(x * 10**places)
    return any(sealed(k + step, f"{exercise}/{places}") == digest for step in (-1, 0, 1))
