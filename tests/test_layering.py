"""The library's layering: formulas <- kernels <- rotary, and no private name crosses a module boundary."""
import ast
import inspect
import os
import subprocess
import sys
from dataclasses import MISSING, fields
from pathlib import Path

import pytest
import torch

import posenc_lib as pl
from posenc_lib.rope import RopeOptions

LIB = Path(pl.__file__).parent


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env=dict(os.environ)).stdout


def test_importing_the_reference_loads_no_fast_path():
    """rope.py imports nothing from posenc_lib.kernels, directly or through the package."""
    loaded = _run("import sys, posenc_lib.rope; print(sorted(m for m in sys.modules if m.startswith('posenc_lib')))")
    assert "'posenc_lib.rope'" in loaded  # the probe sees what it imported
    assert "posenc_lib.kernels" not in loaded and "posenc_lib.rotary" not in loaded, loaded


def test_kernels_package_imports_every_path_including_compiled():
    """Kernels import the reference, never the reverse: their package can list every path."""
    out = _run("import posenc_lib.kernels as k; print(k.__all__, k.compiled.rotate.__module__)")
    assert out.split() == ["['compiled',", "'cpu',", "'torch_fast']", "posenc_lib.kernels.compiled"]


def test_the_package_names_resolve_and_list():
    """Names of the modules above the kernels load on first use; every name in __all__ resolves."""
    assert all(getattr(pl, name) is not None for name in pl.__all__)
    assert set(pl.__all__) <= set(dir(pl))
    with pytest.raises(AttributeError, match="no attribute 'apply_rope_3d'"):
        pl.apply_rope_3d  # noqa: B018


def _private_imports(path: Path, root: Path = LIB) -> list[str]:
    """'file:line name' for every `from .module import _name` (a private name of another module).

    `from . import _validate` (a package-private module) is fine: it is a module, not a name in one.
    """
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("posenc_lib")):
            if node.module is None:
                continue  # from . import submodule
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"{path.relative_to(root)}:{node.lineno} {alias.name}")
    return found


def test_no_private_name_is_imported_across_modules(tmp_path):
    bad = [hit for path in sorted(LIB.rglob("*.py")) for hit in _private_imports(path)]
    assert bad == []
    probe = tmp_path / "probe.py"  # the scan does see a private import
    probe.write_text("from .rope import _helper\nfrom . import _validate as v\n")
    assert _private_imports(probe, tmp_path) == ["probe.py:1 _helper"]


# ---------------------------------------------------------------- one body for every RoPE entry point

ENTRY_POINTS = {
    "apply_rope": pl.apply_rope,
    "apply_rope_nd": pl.apply_rope_nd,
    "RotaryEmbedding": pl.RotaryEmbedding.__init__,
}


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_every_rope_entry_point_takes_every_rope_option(name):
    """RopeOptions' fields are keyword-only parameters of each, with the same defaults: an option added
    to RopeOptions must be added to every entry point, or this test fails."""
    params = inspect.signature(ENTRY_POINTS[name]).parameters
    for f in fields(RopeOptions):
        assert f.name in params, f"{name} lacks {f.name}"
        p = params[f.name]
        assert p.kind == p.KEYWORD_ONLY and f.default is not MISSING and p.default == f.default, (name, f.name)


def test_apply_rope_compiled_passes_every_option_on():
    """apply_rope_compiled(x, positions, **options): its keywords are RopeOptions' by construction."""
    params = list(inspect.signature(pl.apply_rope_compiled).parameters.values())
    assert [(p.name, p.kind) for p in params] == [("x", params[0].POSITIONAL_OR_KEYWORD),
                                                  ("positions", params[0].POSITIONAL_OR_KEYWORD),
                                                  ("options", params[0].VAR_KEYWORD)]
    assert list(inspect.signature(pl.apply_rope).parameters)[:2] == ["x", "positions"]
    with pytest.raises(TypeError, match="unexpected keyword argument 'rotary_dims'"):
        pl.apply_rope_compiled(torch.randn(2, 4), rotary_dims=2)


def test_rope_options_is_what_the_functions_check():
    """The one place that checks them: every entry point raises the same message for the same bad option."""
    x = torch.randn(3, 8)
    coords = torch.zeros(3, 1, dtype=torch.long)
    calls = [lambda **kw: pl.apply_rope(x, **kw), lambda **kw: pl.apply_rope_compiled(x, **kw),
             lambda **kw: pl.apply_rope_nd(x, coords, sections=(4,), **kw), lambda **kw: pl.RotaryEmbedding(8, **kw)]
    for bad, message in ((dict(base=1.0), "base must be a finite number > 1"), (dict(layout="neox"), "layout must be"),
                         (dict(attention_factor=0.0), "attention_factor must be a finite number > 0"),
                         (dict(rotary_dim=3), "rotary_dim must be even"), (dict(inv_freq=[1.0]), "inv_freq must be")):
        for call in calls:
            with pytest.raises(ValueError, match=message):
                call(**bad)
