"""Project-wide pytest set-up: GPU tests are skipped where CUDA is missing, and every test that drives a browser
page carries the ``browser`` marker.

The inner test loop leaves out the slow kinds: ``python3 -m pytest -m "not browser and not multiprocess"``
(``browser``: Chromium through Playwright; ``multiprocess``: torchrun jobs of gloo ranks). CI runs them all.
"""

from __future__ import annotations

import importlib.util

import pytest


def _cuda_available() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "page" in getattr(item, "fixturenames", ()):  # Playwright's page: a browser test, marked or not
            item.add_marker(pytest.mark.browser)
    if any("gpu" in item.keywords for item in items) and not _cuda_available():
        skip = pytest.mark.skip(reason="needs a CUDA device")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)
