"""Memory helpers: returning a buffer's pages to the system."""

from __future__ import annotations

import os
import sys

import pytest
import torch

from spade.resources import _status_kib, drop_pages

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise and /proc are Linux's")


def test_drop_pages_returns_a_buffers_pages_and_leaves_it_usable() -> None:
    buffer = torch.ones(16 << 20)  # 64 MiB, every page touched
    views = [buffer[: 1 << 20], buffer[1 << 20 :], buffer]  # one storage, released once
    rss = _status_kib(os.getpid(), "VmRSS")
    released = drop_pages(views)
    assert released <= buffer.untyped_storage().nbytes()
    assert released > 63 << 20  # all but the partial pages at the ends
    assert rss - _status_kib(os.getpid(), "VmRSS") > 48 << 10  # KiB: most of it left this process
    middle = buffer[4096:-4096]
    assert float(middle.abs().sum()) == 0.0  # whole pages read as zeros
    buffer[:] = 2.0  # and are taken again when written
    assert float(buffer.sum()) == 2.0 * buffer.numel()


def test_drop_pages_leaves_other_devices_alone() -> None:
    meta = torch.empty(1 << 20, device="meta")
    assert drop_pages([meta]) == 0
