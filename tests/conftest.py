import os

import torch
from hypothesis import settings

# Property tests: enough cases to find sign and index slips, few enough for 2 CPU cores.
settings.register_profile("posenc", max_examples=60, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "posenc"))
torch.set_num_threads(min(2, torch.get_num_threads()))
