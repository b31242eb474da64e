"""One Prefect test server for a test module whose child processes run the shipped flows.

`from tests.prefect_api import prefect_api` in a module makes the fixture autouse there: the
module's own process and every child it starts (they inherit PREFECT_API_URL) talk to one
temporary API, instead of each child starting Prefect's ephemeral server.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module", autouse=True)
def prefect_api() -> Iterator[str]:
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        url = str(PREFECT_API_URL.value())
        os.environ["PREFECT_API_URL"] = url
        try:
            yield url
        finally:
            del os.environ["PREFECT_API_URL"]
