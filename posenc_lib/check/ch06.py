"""Checkers for notebooks/06_*.ipynb."""
from __future__ import annotations

__all__: list[str] = []
