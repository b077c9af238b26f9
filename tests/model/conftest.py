"""Model tests use tiny tensors: one torch thread is faster for them, and on a busy machine
multi-threaded tiny ops wait on descheduled threads (a 3 s test took 30 s on 2 shared cores)."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def single_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
