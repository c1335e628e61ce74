import os

import pytest
import torch
from hypothesis import settings

# Property tests: enough cases to find sign and index slips, few enough for 2 CPU cores.
settings.register_profile("posenc", max_examples=60, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "posenc"))
torch.set_num_threads(min(2, torch.get_num_threads()))


def pytest_collection_modifyitems(config, items):
    """Tests marked ``gpu`` need CUDA: without it they are skipped with one line that says so."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="no CUDA device here: `make test-gpu` runs the gpu tests on a GPU machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def every_size(monkeypatch):
    """Let the fast paths serve tensors of any size (rotary.SMALL sends small CPU tensors to the reference)."""
    from posenc_lib import rotary

    monkeypatch.setattr(rotary, "SMALL", 0)
