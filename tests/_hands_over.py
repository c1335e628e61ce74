"""What a checker module must not hand a learner: an answer, held in a constant or returned by a callable.

`held_answers(module, answers, calls)` looks at every name a chapter's checker module defines: a
constant equal to an answer is reported, and so is any of the module's own functions that returns
one when called with any of `calls`. Answers are compared by their canonical form (check._core:
whole numbers, lists in order, sets without) and, for numbers and tensors, by value.
"""
from __future__ import annotations

import inspect
from types import ModuleType
from typing import Any, Iterable

import torch

from posenc_lib.check._core import canonical, float64_tensor


def _same(value: Any, answer: Any) -> bool:
    if isinstance(value, bool) or value is None:  # a checker's verdict, not an answer
        return False
    if isinstance(value, (str, bytes)) != isinstance(answer, (str, bytes)):
        return False
    text = canonical(value)
    if text is not None and text == canonical(answer):
        return True
    a, b = float64_tensor(value), float64_tensor(answer)
    return a is not None and b is not None and a.shape == b.shape and bool(torch.allclose(a, b, rtol=1e-6))


def held_answers(module: ModuleType, answers: Iterable[Any], calls: Iterable[tuple] = ((),)) -> list[str]:
    """The names in `module` that hold an answer, or return one for some argument tuple in `calls`."""
    answers, calls = list(answers), list(calls)
    found = []
    for name, value in vars(module).items():
        if name.startswith("__") or inspect.ismodule(value):
            continue
        if callable(value):
            if getattr(value, "__module__", None) != module.__name__:
                continue  # imported helpers (report, sealed, torch functions) belong to other modules
            for args in calls:
                try:
                    result = value(*args)
                except Exception:  # noqa: BLE001 (a call that does not fit is simply not an answer)
                    continue
                if any(_same(result, a) for a in answers):
                    found.append(f"{name}{args}")
        elif any(_same(value, a) for a in answers):
            found.append(name)
    return found
