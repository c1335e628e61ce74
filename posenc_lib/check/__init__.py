"""Self-check exercises: ``from posenc_lib import check`` then ``check.<exercise>(answer)``.

Each checker prints what is right, what is wrong and a hint; it returns True, False,
or None for an exercise not attempted yet, and never raises. One module per chapter.
"""
from ._core import report
from .ch01 import *  # noqa: F401,F403
from .ch02 import *  # noqa: F401,F403
from .ch03 import *  # noqa: F401,F403
from .ch04 import *  # noqa: F401,F403
from .ch05 import *  # noqa: F401,F403
from .ch06 import *  # noqa: F401,F403
from .ch07 import *  # noqa: F401,F403
