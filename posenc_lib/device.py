"""Where tensors live by default."""
from __future__ import annotations

import torch


def default_device() -> torch.device:
    """The best available device: CUDA if present, else Apple's MPS, else the CPU.

    Library functions never call this themselves: they follow the device of
    their inputs (or the ``device=`` you pass). Notebooks call it once to pick
    where to put their tensors.
    Taught in: notebooks/00_index.ipynb
    """
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")
