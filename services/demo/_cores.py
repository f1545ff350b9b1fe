"""How the demo load uses this machine's cores: torch on one thread, the model loaded while the store starts."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from services.retrieval import embedding
from services.settings import Settings
from services.store import get_engine


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """Torch's intra-op threads set to one while the demo loads, and put back after.

    The demo encodes a few hundred small batches (one question, one chunk's sentences).
    On the 2-core machine it was measured on, shared with other work (load average 4-5),
    two intra-op threads made each of them several times slower than one (one question:
    0.076 s against 0.014 s; 0.65 s at worse moments): the two threads wait for each other
    at every layer while a third process holds a core. The whole load went from 184 s to
    68 s under a profiler with this alone. The setting is process-wide, so other sessions
    of the same server encode on one thread too until the load ends.
    """
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def start_store_and_model(settings: Settings) -> None:
    """Start (and migrate) the store while the embedding model loads: each took seconds,
    and neither needs the other. Both are cached for the process, so the load reuses them."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="demo-model") as pool:
        model = pool.submit(embedding.load_model, settings.embedding_model)
        get_engine(settings)
        model.result()
