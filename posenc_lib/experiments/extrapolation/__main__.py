"""python -m posenc_lib.experiments.extrapolation"""
import sys

from . import main

sys.exit(main())
