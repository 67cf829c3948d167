"""A long story opens in seconds (issue 34, item 1), on the real embedded model: the
model reads at most a window of a story's end on a CPU (`[mlx] read_window`), and a
story read once is not read again by a second backend, as after a restart: its KV comes
from the disk (`backends.mlx.kv_disk`), checked against the model and the ids."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

import numpy as np
import pytest

from backends import create_backend
from backends.mlx.backend import CPU_READ_WINDOW, MLXBackend
from backends.mlx.kv_disk import DiskKV
from backends.mlx.kv_keep import KEEP_AT_LEAST
from weave.config import ConfigError, load_settings
from weave.search.beams import expand
from weave.search.params import SearchParams
from weave.story.model_context import fitted_context
from weave.story.steering import Steering

ROOT = Path(__file__).resolve().parent.parent
LONG = (ROOT / "bench" / "long_story.txt").read_text()
PARAMS = SearchParams(cutoff=0.1, max_depth=4, max_suggestions=8)


def reopened(path, folder: Path, **options) -> MLXBackend:
    """A backend as a restarted page makes it: a new one, with the disk's folder."""
    return MLXBackend(path, kv_disk=folder, kv_disk_bytes=1 << 30, **options)


def test_on_a_cpu_the_model_reads_a_window_of_the_storys_end(fresh_mlx_backend):
    backend = fresh_mlx_backend
    assert backend.context_length == 8192
    assert backend.read_window == CPU_READ_WINDOW
    context = fitted_context(backend, Steering(), LONG * 3, room=PARAMS.max_depth)
    assert context.token_count <= CPU_READ_WINDOW - PARAMS.max_depth
    assert context.left_out > 0
    assert context.ids == tuple(backend.tokenize(LONG * 3)[context.left_out :])
    result = expand(backend, list(context.ids), PARAMS)
    assert result.stats.prefill_tokens <= CPU_READ_WINDOW


def test_the_read_window_is_a_setting_checked_like_the_others(tmp_path, embedded_model_path):
    settings = load_settings(env={"LLOOM_READ_WINDOW": "0", "LLOOM_KV_DISK_MB": "0"})
    assert settings.mlx.read_window == 0 and settings.mlx.kv_disk_mb == 0
    with closing(MLXBackend(embedded_model_path, read_window=0)) as backend:
        assert backend.read_window == backend.context_length  # 0: the model's whole window
    with pytest.raises(ConfigError, match="LLOOM_READ_WINDOW"):
        load_settings(env={"LLOOM_READ_WINDOW": "-1"})
    bad = tmp_path / "config.toml"
    bad.write_text("[mlx]\nread_window = 1.5\n")
    with pytest.raises(ConfigError, match="read_window"):
        load_settings(bad, env={})


def test_a_story_read_once_is_not_read_again_after_a_restart(
    tmp_path, embedded_model_path, closed_after
):
    folder = tmp_path / "kv"
    first = closed_after(reopened(embedded_model_path, folder))
    ids = first.tokenize(LONG)[:700]
    before = expand(first, ids, PARAMS)
    assert before.stats.prefill_tokens >= len(ids) - 1
    first.close()  # waits for the write in flight
    assert len(list(folder.glob("*/*.npz"))) == 1

    second = closed_after(reopened(embedded_model_path, folder))
    after = expand(second, ids, PARAMS)
    assert after.stats.prefill_tokens == 0
    assert [s.text for s in after.suggestions] == [s.text for s in before.suggestions]
    delta = max(
        abs(a.score - b.score) for a, b in zip(after.suggestions, before.suggestions, strict=True)
    )
    assert delta < 1e-3
    # an edit near the end reads only what follows the edit
    edited = ids[:-20] + second.tokenize(" and then the river rose.")
    third = closed_after(reopened(embedded_model_path, folder))
    assert expand(third, edited, PARAMS).stats.prefill_tokens == len(edited) - (len(ids) - 20)


def test_the_page_and_the_command_line_keep_it_in_the_cache_folder(tmp_path, embedded_model_path):
    """`create_backend` (the page's and the command line's) keeps it in cache_dir/kv."""
    env = {"LLOOM_MODEL": str(embedded_model_path), "LLOOM_CACHE_DIR": str(tmp_path)}
    with closing(create_backend(load_settings(env=env), env={})) as backend:
        expand(backend, backend.tokenize(LONG)[: KEEP_AT_LEAST + 50], PARAMS)
    assert len(list((tmp_path / "kv").glob("*/*.npz"))) == 1


def test_stored_kv_is_checked_before_use(tmp_path, embedded_model_path, closed_after):
    folder = tmp_path / "kv"
    first = closed_after(reopened(embedded_model_path, folder))
    ids = first.tokenize(LONG)[: KEEP_AT_LEAST + 100]
    expand(first, ids, PARAMS, healing=False)  # all of `ids` read (no word re-spelled)
    first.close()
    [path] = folder.glob("*/*.npz")
    # another model's KV, copied into this model's folder, is refused and removed
    stranger = folder / "another-model" / path.name
    stranger.parent.mkdir()
    stranger.write_bytes(path.read_bytes())
    other = DiskKV(folder, "another-model", 1 << 30)
    assert other.covered(ids) == len(ids)  # its ids match...
    assert other.load(ids, more_than=0) is None  # ...but not its model
    assert not stranger.exists()
    # a damaged file is removed, and the story is read again
    path.write_bytes(path.read_bytes()[:1000])
    second = closed_after(reopened(embedded_model_path, folder))
    assert expand(second, ids, PARAMS).stats.prefill_tokens >= len(ids) - 1


def test_the_disk_holds_its_cap_dropping_the_least_recently_used(tmp_path):
    kv = np.zeros((2, 1, 300, 4), np.float32)  # 9,600 bytes a side
    disk = DiskKV(tmp_path, "model", max_bytes=50_000)
    for start in (0, 1000, 2000):
        disk.keep(range(start, start + 300), kv, kv, "float32", ([1], [-0.5]))
        disk.close()
    files = list(tmp_path.glob("*/*.npz"))
    assert len(files) == 2 and sum(f.stat().st_size for f in files) <= 50_000
    assert disk.covered(range(300)) == 0  # the oldest went
    assert disk.covered(range(2000, 2300)) == 300
    # an entry that another extends is dropped when that one is written
    longer = np.zeros((2, 1, 400, 4), np.float32)
    disk.keep(range(2000, 2400), longer, longer, "float32", ([1], [-0.5]))
    disk.close()
    assert disk.covered(range(2000, 2300)) == 300
    stored = disk.load(range(2000, 2300), more_than=0)
    assert stored is not None and stored.keys.shape == (2, 1, 300, 4) and stored.top_ids is None
    assert disk.covered(range(2000, 2400)) == 400
    # the shorter file went; to make room for the longer, the least recently used too
    assert len(list(tmp_path.glob("*/*.npz"))) == 1 and disk.covered(range(1000, 1300)) == 0
