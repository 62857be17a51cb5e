"""Shared by the tests: import path, library location, requirement handling.

By default the tests import the ccv1d next to them (python/ccv1d); set CCV1D_TEST_USE_INSTALLED=1
to test whatever `import ccv1d` finds (e.g. a pip-installed copy). CAUSAL_CONV1D_LIB defaults to
target/release/libcausal_conv1d.so of this checkout when that exists.
"""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
REPO = os.path.dirname(PYTHON_DIR)
HEADER = os.environ.get("CCV1D_HEADER", os.path.join(REPO, "include", "causal_conv1d.h"))

if not os.environ.get("CCV1D_TEST_USE_INSTALLED"):
    sys.path.insert(0, PYTHON_DIR)
if not os.environ.get("CAUSAL_CONV1D_LIB"):
    _built = os.path.join(REPO, "target", "release", "libcausal_conv1d.so")
    if os.path.exists(_built):
        os.environ["CAUSAL_CONV1D_LIB"] = _built

IN_CI = os.environ.get("CI", "").lower() == "true"


def require(ok, what):
    """Skip loudly when `what` is missing, or fail under CI=true (a missing tool must not pass)."""
    if ok:
        return
    if IN_CI:
        raise AssertionError(f"CI=true but {what} is missing")
    sys.stderr.write(f"\n*** SKIPPED: {what} is missing ***\n")
    raise unittest.SkipTest(f"{what} is missing")


try:
    import numpy as np
except ImportError:
    np = None
