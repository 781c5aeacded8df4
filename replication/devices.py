"""Which GPUs this machine lets a study use, and how runs are spread over them.

A run whose study declares ``gpus(config) >= 1`` (the prompt study on CUDA) gets a device of
its own: the local executor pins each worker process to one visible device through
``CUDA_VISIBLE_DEVICES`` before it imports anything that initialises CUDA (so inside the
worker that device is ``cuda`` / ``cuda:0``), and Ray tasks ask for ``num_gpus`` and get their
device from Ray in the same way. The device a run used is recorded in its provenance.
"""
from __future__ import annotations

import os

ENV = "CUDA_VISIBLE_DEVICES"


def visible_gpus() -> list[str]:
    """The GPU ids this process may use: ``CUDA_VISIBLE_DEVICES`` if set, else every device torch sees.

    Without torch (or without CUDA) the list is empty.
    """
    env = os.environ.get(ENV)
    if env is not None:
        ids = []
        for item in env.split(","):
            item = item.strip()
            if not item or item.startswith("-"):  # CUDA stops at the first invalid entry
                break
            ids.append(item)
        return ids
    try:
        import torch
    except ImportError:
        return []
    return [str(i) for i in range(torch.cuda.device_count())]


def worker_devices(workers: int, gpus: list[str]) -> list[str]:
    """The device of each of ``workers`` workers: one GPU each, round-robin when there are more workers."""
    if not gpus:
        return []
    return [gpus[i % len(gpus)] for i in range(workers)]


def pin(device: str) -> None:
    """Make ``device`` the only GPU this process sees (call before CUDA is initialised)."""
    os.environ[ENV] = device
