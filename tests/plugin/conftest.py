"""Every plugin test runs inside `tfp.scope()`: registrations made by a test (or pulled from the library) are
undone afterwards, so no test sees another's plugins."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import tensorforge.plugin as tfp  # noqa: E402


@pytest.fixture(autouse=True)
def plugin_scope():
    with tfp.scope():
        yield
