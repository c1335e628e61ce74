"""Where the chapters compute: the CPU unless the learner opts in to an accelerator.

The chapters' worked examples are small, and the CPU gives the same digits on every machine
(and has float64), so the text a learner reads is the stored text whether or not a GPU is
present. ``POSENC_DEVICE`` opts in: ``cuda``, ``mps`` (or ``cuda:1``, ...) names a device, ``auto``
takes the best one present (CUDA, then Apple's MPS, then the CPU). Random inputs are drawn on
the CPU and then moved, so opting in changes nothing but rounding: the asserts still hold, and
printed digits may differ in the last place.

Library functions never call this themselves: they follow the device of their inputs (or the
``device=`` you pass).
"""
from __future__ import annotations

import os

import torch

ENV = "POSENC_DEVICE"


def best_device() -> torch.device:
    """The best device present: CUDA, else Apple's MPS, else the CPU (training, timings, ``auto``)."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def default_device() -> torch.device:
    """Where the chapters put their tensors: the CPU, or the device ``POSENC_DEVICE`` names.

    POSENC_DEVICE unset, empty or "cpu": the CPU (the stored outputs, on any machine)
                  "auto": ``best_device()``; "cuda", "cuda:1", "mps", ...: that device
    raises:       ValueError naming POSENC_DEVICE when the value is no device, or one this
                  machine lacks
    Taught in: notebooks/00_index.ipynb
    """
    return device_named(os.environ.get(ENV, ""), ENV)


def device_named(value: str, name: str = "device") -> torch.device:
    """The device a setting names: "" or "cpu" the CPU, "auto" ``best_device()``, else "cuda", "cuda:1",
    "mps", ... Raises ValueError naming the setting (``name``) for no device or one this machine lacks."""
    value = str(value).strip().lower()
    if value in ("", "cpu"):
        return torch.device("cpu")
    if value == "auto":
        return best_device()
    try:
        device = torch.device(value)
    except RuntimeError:
        raise ValueError(f"{name} must be cpu, auto, cuda[:N] or mps, got {value!r}") from None
    present = {"cuda": torch.cuda.is_available(),
               "mps": bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())}
    if not present.get(device.type, True):
        raise ValueError(f"{name}={value!r} asks for {device.type}, which this machine does not have "
                         f"(use cpu, or auto for the best device present)")
    return device


# Devices whose float64 arithmetic the library uses in place. Apple's MPS has no float64 at all;
# for it (and any device not listed) float64 work runs on the CPU and only its result is moved.
_FLOAT64_IN_PLACE = ("cpu", "cuda", "meta")


def float64_device(device: torch.device | str | None) -> torch.device:
    """Where float64 work for tensors on ``device`` runs: ``device`` itself where it has float64
    (CPU, CUDA), else the CPU (MPS). None means the CPU."""
    device = torch.device("cpu") if device is None else torch.device(device)
    return device if device.type in _FLOAT64_IN_PLACE else torch.device("cpu")


def moved(t: torch.Tensor, device: torch.device | str | None, dtype: torch.dtype | None = None) -> torch.Tensor:
    """t on ``device`` (and in ``dtype``), copied without waiting: a small constant made on the CPU reaches
    a GPU asynchronously (the CUDA runtime stages it), so the forward pass never stalls on the copy."""
    device = t.device if device is None else torch.device(device)
    dtype = t.dtype if dtype is None else dtype
    if t.device == device:
        return t.to(dtype)
    return t.to(dtype).to(device, non_blocking=True) if device.type != "cpu" else t.to(device, dtype)
