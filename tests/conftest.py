"""Fixtures shared by several test modules."""
import pytest


@pytest.fixture
def one_torch_thread():
    """Keep torch at one CPU thread for the test (the suite may share the machine with long jobs)."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)
