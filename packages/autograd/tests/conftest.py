"""Make core's torch harness importable from the autograd tests."""
import os
import sys

_CORE_TESTS = os.path.join(os.path.dirname(__file__), "..", "..", "core", "tests")
sys.path.insert(0, os.path.abspath(_CORE_TESTS))
