"""A pytest plugin of the mutation check (`-p tests.mutation.first`): the tests named in
TOOLSWEEP_TESTS_FIRST (node ids, one a line) run ahead of the rest of the selection, in its order.

They are the tests that killed the mutant last time: with `-x`, a run that still kills it ends at the
first test, and the rest of the selection runs only when they no longer do."""

from __future__ import annotations

import os

import pytest

TESTS_FIRST = "TOOLSWEEP_TESTS_FIRST"


@pytest.hookimpl(trylast=True)  # after any other ordering (tests/conftest.py's long tests first)
def pytest_collection_modifyitems(config, items):
    first = set(filter(None, os.environ.get(TESTS_FIRST, "").split("\n")))
    if first:
        items.sort(key=lambda item: item.nodeid not in first)
