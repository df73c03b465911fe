import os
import sys

sys.path.insert(0, os.path.dirname(__file__))     # light_reseed, model_checks, and the model tests' check functions
