"""Self-check exercises: ``from posenc_lib import check`` then ``check.<exercise>(answer)``.

Each checker prints what is right, what is wrong and a hint, never the expected answer; it
returns True, False, or None for an exercise not attempted yet. With ``POSENC_GRADING=1`` in
the environment (an autograder such as nbgrader) a wrong or unattempted answer raises
AssertionError with the same text instead. One module per chapter.
"""
from ._core import grading, report
from .ch01 import *  # noqa: F401,F403
from .ch02 import *  # noqa: F401,F403
from .ch03 import *  # noqa: F401,F403
from .ch04 import *  # noqa: F401,F403
from .ch05 import *  # noqa: F401,F403
from .ch06 import *  # noqa: F401,F403
from .ch07 import *  # noqa: F401,F403
from .ch08 import *  # noqa: F401,F403
from .ch09 import *  # noqa: F401,F403
from .ch10 import *  # noqa: F401,F403
