"""The MLX backend's KV kept on disk: a story read once is not read again after a restart.

An entry is one context's token ids, the KV of all of them as the fragment tree holds it
((layers, kv_heads, tokens, head_dim) keys and values, every layer in one array) and the
top candidates after the last id. Entries live in `folder/<model fingerprint>/` as
`.npz` files (numpy's, uncompressed: KV does not compress); the fingerprint names the
model's files (`model_fingerprint`), and each file repeats it and its ids, both checked
before its KV is used. A context may use an entry's KV for the ids the two have in
common from the start (attention is causal: a prefix's KV does not depend on what
follows), so a story edited near its end still reuses the rest.

The folder holds at most `max_bytes` in all (every model's entries together): the least
recently used files go first (a file's mtime is touched whenever it is used). An entry
whose ids another entry extends is dropped when that one is written. Files are written
whole under a temporary name and renamed, so a page and the command line can share the
folder; a file that cannot be read is removed.

Writing happens on a thread of its own, so the model's worker does not wait for the
disk; `close` waits for the writes in flight. This module knows nothing of MLX: the
backend hands it numpy arrays and turns what it reads back into its own
(`backends.mlx`).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
import threading
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

FORMAT = 1  # bumped when the file's layout changes: older files are then another model's


@dataclass(frozen=True)
class StoredKV:
    """What an entry gives a context: the KV of its first `len(ids)` ids and, when the
    entry ends exactly there, the top candidates after them."""

    ids: tuple[int, ...]
    keys: np.ndarray  # (layers, kv_heads, len(ids), head_dim), as the model stores KV
    values: np.ndarray
    dtype: str  # the KV's dtype as MLX names it ("float32", "bfloat16", ...)
    top_ids: tuple[int, ...] | None  # most likely first
    top_logprobs: tuple[float, ...] | None


@dataclass(frozen=True)
class _Entry:
    path: Path
    ids: np.ndarray  # (n,) int64


def model_fingerprint(folder: Path, *facts: object) -> str:
    """A short hash of an mlx-lm model folder's config and weight files (names, sizes,
    modification times) and of `facts` (the KV's shape and dtype): what must match for
    stored KV to be this model's."""
    folder = Path(folder)
    parts: list[object] = [FORMAT, *facts]
    config = folder / "config.json"
    parts.append(config.read_bytes() if config.is_file() else b"")
    for weights in sorted(folder.glob("*.safetensors")):
        stat = weights.stat()
        parts.append((weights.name, stat.st_size, stat.st_mtime_ns))
    digest = hashlib.sha256()
    for part in parts:
        digest.update(repr(part).encode())
    return digest.hexdigest()[:24]


class DiskKV:
    """The entries of one model in `folder`, capped at `max_bytes` for the whole folder."""

    def __init__(self, folder: Path, fingerprint: str, max_bytes: int) -> None:
        self.root = Path(folder)
        self.fingerprint = fingerprint
        self.max_bytes = max_bytes
        self.folder = self.root / fingerprint
        self.folder.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()  # guards _entries: the writer thread adds to it
        self._entries: list[_Entry] = [e for e in map(self._entry, self._files()) if e]
        self._writers: list[threading.Thread] = []

    # -- reading ---------------------------------------------------------------------
    def covered(self, ids: Sequence[int]) -> int:
        """How many leading ids of `ids` the longest-matching entry holds KV for."""
        return self._best(np.asarray(ids, dtype=np.int64))[1]

    def load(self, ids: Sequence[int], *, more_than: int) -> StoredKV | None:
        """The stored KV for the longest run of leading `ids` an entry holds, when that is
        longer than `more_than` ids; None otherwise (or when the file fails its checks)."""
        wanted = np.asarray(ids, dtype=np.int64)
        entry, common = self._best(wanted)
        if entry is None or common <= more_than:
            return None
        try:
            with np.load(entry.path) as data:
                if str(data["fingerprint"]) != self.fingerprint:
                    raise ValueError("another model's KV")
                stored = data["ids"]
                if not np.array_equal(stored[:common], wanted[:common]):
                    raise ValueError("its ids are not the ones indexed")
                whole = common == len(stored)
                keys, values = data["keys"][:, :, :common], data["values"][:, :, :common]
                top_ids = tuple(data["top_ids"].tolist()) if whole else None
                top_logprobs = tuple(data["top_logprobs"].tolist()) if whole else None
                dtype = str(data["dtype"])
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as e:
            log.warning("dropping the stored KV %s: %s", entry.path.name, e)
            self._forget(entry)
            return None
        _touch(entry.path)
        return StoredKV(
            tuple(wanted[:common].tolist()), keys, values, dtype, top_ids or None, top_logprobs
        )

    # -- writing ---------------------------------------------------------------------
    def keep(
        self,
        ids: Sequence[int],
        keys: np.ndarray,
        values: np.ndarray,
        dtype: str,
        top: tuple[Sequence[int], Sequence[float]],
    ) -> None:
        """Write an entry for `ids` on a thread of its own (see the module's docstring)."""
        job = (np.asarray(ids, dtype=np.int64), keys, values, dtype, top)
        writer = threading.Thread(target=self._write, args=job, name="lloom-kv-disk")
        self._writers = [w for w in self._writers if w.is_alive()] + [writer]
        writer.start()

    def close(self) -> None:
        """Wait for the writes in flight."""
        for writer in self._writers:
            writer.join()
        self._writers = []

    def _write(self, ids, keys, values, dtype, top) -> None:
        name = hashlib.sha256(ids.tobytes()).hexdigest()[:32] + ".npz"
        path = self.folder / name
        try:
            with tempfile.NamedTemporaryFile(dir=self.folder, suffix=".part", delete=False) as f:
                np.savez(
                    f,
                    fingerprint=np.array(self.fingerprint),
                    ids=ids,
                    keys=keys,
                    values=values,
                    dtype=np.array(dtype),
                    top_ids=np.asarray(top[0], dtype=np.int64),
                    top_logprobs=np.asarray(top[1], dtype=np.float64),
                )
            os.replace(f.name, path)
        except OSError as e:  # a full or read-only disk costs the reopen, never the search
            log.warning("the story's KV could not be kept on disk: %s", e)
            Path(f.name).unlink(missing_ok=True)
            return
        with self._lock:
            kept = [e for e in self._entries if e.path != path]
            shorter = [e for e in kept if len(e.ids) < len(ids) and _starts(ids, e.ids)]
            for entry in shorter:  # the new entry holds all they held
                entry.path.unlink(missing_ok=True)
            self._entries = [e for e in kept if e not in shorter] + [_Entry(path, ids)]
        self._trim()

    def _trim(self) -> None:
        """Remove the least recently used files until the folder fits `max_bytes`."""
        files = []
        for path in self.root.glob("*/*.npz"):
            try:
                stat = path.stat()
            except OSError:  # removed meanwhile by another process
                continue
            files.append((stat.st_mtime_ns, stat.st_size, path))
        total = sum(size for _, size, _ in files)
        for _, size, path in sorted(files):
            if total <= self.max_bytes:
                break
            path.unlink(missing_ok=True)
            total -= size
        with self._lock:
            self._entries = [e for e in self._entries if e.path.exists()]

    # -- internals -------------------------------------------------------------------
    def _files(self) -> list[Path]:
        return sorted(self.folder.glob("*.npz"))

    def _entry(self, path: Path) -> _Entry | None:
        try:
            with np.load(path) as data:
                return _Entry(path, data["ids"].astype(np.int64))
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as e:
            log.warning("dropping the stored KV %s: %s", path.name, e)
            path.unlink(missing_ok=True)
            return None

    def _best(self, wanted: np.ndarray) -> tuple[_Entry | None, int]:
        best, longest = None, 0
        with self._lock:
            entries = list(self._entries)
        for entry in entries:
            common = _common(entry.ids, wanted)
            if common > longest:
                best, longest = entry, common
        return best, longest

    def _forget(self, entry: _Entry) -> None:
        entry.path.unlink(missing_ok=True)
        with self._lock:
            self._entries = [e for e in self._entries if e is not entry]


def _common(a: np.ndarray, b: np.ndarray) -> int:
    """How many leading ids `a` and `b` share."""
    n = min(len(a), len(b))
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if len(differ) else n


def _starts(ids: np.ndarray, prefix: np.ndarray) -> bool:
    return _common(ids, prefix) == len(prefix)


def _touch(path: Path) -> None:
    with contextlib.suppress(OSError):  # removed meanwhile: it was used all the same
        os.utime(path)
