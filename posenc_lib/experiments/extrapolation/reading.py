"""Reading a results file: accuracies, seed orderings, attention heads, the committed results."""
from __future__ import annotations

from .. import _cli, _training

def accuracy(results: dict, task: str, method: str, mode: str = "nonoverlapping") -> dict[int, dict | None]:
    """{L: {"acc": [per seed], "mean", "min", "max"} or None} for one curve of a results dict."""
    return {int(L): r for L, r in results["tasks"][task]["methods"][method][mode].items()}


def compare(results: dict, task: str, a: str, b: str, L: int, mode: str = "nonoverlapping") -> int:
    """+1 if every seed of `a` beats every seed of `b` at length L (the ranges do not overlap),
    -1 if the reverse, 0 if the ranges overlap: the seeds cannot tell the two apart."""
    ra, rb = accuracy(results, task, a, mode)[L], accuracy(results, task, b, mode)[L]
    if ra["min"] > rb["max"]:
        return 1
    if rb["min"] > ra["max"]:
        return -1
    return 0


def separation(results: dict, task: str, a: str, b: str, L: int, mode: str = "nonoverlapping") -> float:
    """The gap between the worst seed of `a` and the best seed of `b` at length L, in units of
    the evaluation noise of that gap (``_training.separation``): below 0 the seed ranges overlap,
    0 to 2 a thin win (fewer answers than two standard errors), above 2 a clear one."""
    ra, rb = accuracy(results, task, a, mode)[L], accuracy(results, task, b, mode)[L]
    return _training.separation(ra["min"], rb["max"], min(ra["n"], rb["n"]))


def separation_of(worst_a: float, best_b: float, n: int) -> float:
    """``separation`` for two accuracies given directly: the worst seed of A, the best seed of B, each
    measured on n answers (n = the sequences, to count each sequence once). The one formula is
    ``_training.separation``; this is its public name."""
    return _training.separation(worst_a, best_b, n)


ordering_by_chance = _training.ordering_by_chance  # P(every seed of A beats every seed of B) by chance: 1/20 for 3 and 3


def attention_heads(results: dict, task: str, method: str, L: int, key: str = "mass",
                    mode: str = "nonoverlapping") -> list[list[list[float | None]]]:
    """[seed][layer][head] of one attention measurement (``key``, see ``attention_profile``) at length L,
    on the main test sequences ("nonoverlapping") or the recall control ("trained_distances")."""
    return [[[h[key] for h in layer] for layer in s["methods"][method]["attention"][mode][str(L)]]
            for s in results["tasks"][task]["seeds"]]


def load_results(name: str = "extrapolation") -> dict:
    """A committed results file, results/<name>.json, wherever the caller runs (notebooks/, the root)."""
    return _cli.load_results(name)
