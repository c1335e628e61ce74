"""What a checker module defines itself, for the tests that it hands no answer to the learner."""
import inspect
from types import ModuleType
from typing import Any


def defined_here(module: ModuleType) -> dict[str, Any]:
    """The module's own functions and constants, public or private, but not its checkers (``__all__``) and not
    what it imports (torch, _core, _guard: tested with their own modules)."""
    out = {}
    for name in dir(module):
        value = getattr(module, name)
        if name.startswith("__") or inspect.ismodule(value) or name in module.__all__:
            continue
        if callable(value) and getattr(value, "__module__", None) != module.__name__:
            continue
        out[name] = value
    return out


def flat(value: Any) -> list[Any]:
    """Every scalar inside nested dicts (their values), lists and tuples."""
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in flat(v)]
    return [value]
