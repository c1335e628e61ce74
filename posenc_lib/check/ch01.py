"""Checkers for notebooks/01_*.ipynb."""
from __future__ import annotations

__all__: list[str] = []
