"""How every exercise checker reports: never raises, always says what is right or wrong."""
from __future__ import annotations

from typing import Any, Callable, Iterable

Verdict = tuple[bool, str]


def not_attempted(answer: Any) -> bool:
    """An untouched exercise: the answer is still None / ... ."""
    return answer is None or answer is Ellipsis


def report(title: str, answer: Any, run: Callable[[Any], Iterable[Verdict]], hint: str) -> bool | None:
    """Run ``run(answer)`` and print one line per verdict, plus the hint when something is wrong.

    returns: True (all right), False (something wrong) or None (not attempted yet).
    A learner's function that raises NotImplementedError counts as not attempted;
    any other exception is reported, never re-raised.
    """
    print(f"Exercise: {title}")
    if not_attempted(answer):
        print("  … not attempted yet: write your answer in the cell above, run it, then run this cell.")
        return None
    try:
        verdicts = list(run(answer))
    except NotImplementedError:
        print("  … not attempted yet: your function still raises NotImplementedError.")
        return None
    except Exception as e:  # a learner's bug is feedback, not a crash
        print(f"  ✗ your answer raised {type(e).__name__}: {e}")
        print(f"  hint: {hint}")
        return False
    for ok, message in verdicts:
        print(f"  {'✓' if ok else '✗'} {message}")
    ok = all(ok for ok, _ in verdicts)
    print("  all correct!" if ok else f"  hint: {hint}")
    return ok


def close(a: Any, b: Any, atol: float = 1e-4) -> bool:
    """True when two tensors/arrays/numbers have the same shape and values (to atol)."""
    import torch

    try:
        ta = torch.as_tensor(a, dtype=torch.float64)
        tb = torch.as_tensor(b, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        return False
    return ta.shape == tb.shape and bool(torch.allclose(ta, tb, atol=atol, rtol=0, equal_nan=True))
