"""Keeps the unit tier unit: a test here that asks for a server fixture fails at once.

``tests/conftest.py`` starts its servers lazily, only for tests that request them; these
overrides make such a request an error instead of a silent, slow server start.
"""

from __future__ import annotations

from typing import NoReturn

import pytest

NO_SERVERS = "the unit tier starts no server; a test that needs one belongs in tests/"


@pytest.fixture(scope="session")
def temporal() -> NoReturn:
    """Overrides the session's dev server (and so ``client``, ``stack`` and ``llm``)."""
    pytest.fail(NO_SERVERS)


@pytest.fixture
def skipping() -> NoReturn:
    """Overrides the time-skipping test server."""
    pytest.fail(NO_SERVERS)


@pytest.fixture
def receiver() -> NoReturn:
    """Overrides the local HTTP receiver."""
    pytest.fail(NO_SERVERS)
