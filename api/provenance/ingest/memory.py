"""Keeping an ingest's memory bounded: glibc's allocator told not to hold what embedding batches freed. The
ingest command, `provenance worker` and a server running ingest workers (INGEST_WORKERS) call it."""

from __future__ import annotations

import ctypes

# glibc's mallopt parameters (malloc.h): the size from which a block is its own mmap, and the most arenas.
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
# glibc's default threshold, fixed: a block this large or larger is mapped, and unmapped when freed.
INGEST_MMAP_THRESHOLD = 128 * 1024


def bound_allocator(arenas: int = 2, mmap_threshold: int = INGEST_MMAP_THRESHOLD) -> bool:
    """Keep glibc malloc from holding what an ingest's embedding batches freed; False off glibc. Called by
    what ingests: the ingest command, `provenance worker`, and `serve` when it runs ingest workers.

    - The mmap threshold, fixed. By default glibc raises it to the size of each mapped block freed (up to
      32 MiB), so after onnxruntime's first batch its activations (24 MiB each at 32 x 128 tokens: 32 x 12
      heads x 128 x 128 floats) are carved from the heap instead, where the freed ones fragment and stay
      resident: one session run of 32 x 128 tokens peaked 570 MiB above the loaded session, against 100 MiB
      with the threshold fixed (setting it at all turns the adjustment off). Mapping each costs page faults,
      a few per cent of a run.
    - At most `arenas` arenas. glibc gives each allocating thread an arena of its own and keeps what each
      held at its peak: onnxruntime's threads kept 128 MiB more resident over an ingest."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    return bool(libc.mallopt(M_MMAP_THRESHOLD, mmap_threshold)) and bool(libc.mallopt(M_ARENA_MAX, arenas))
