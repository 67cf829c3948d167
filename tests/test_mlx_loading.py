"""Naming and loading the writer's model on MLX (`backends.mlx.loading`) and what the
backend says it runs (`backends.mlx.weights.ModelInfo`): folders, hub ids from an
offline Hugging Face cache the test builds, broken config.json files, quantized models
dequantized within the budget or kept outside it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from backends.errors import BackendError
from backends.mlx.backend import MLXBackend
from tests.mlx_models import tiny_model

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, embedded_model_path) -> Path:
    folder = tmp_path_factory.mktemp("models") / "tiny-llama"
    return tiny_model(folder, "llama", tokenizer_from=embedded_model_path)


@pytest.fixture(scope="module")
def tiny_4bit(tmp_path_factory, embedded_model_path) -> Path:
    folder = tmp_path_factory.mktemp("models") / "tiny-llama-4bit"
    return tiny_model(folder, "llama", tokenizer_from=embedded_model_path, bits=4)


def hub_cache(root: Path, repo: str, folder: Path) -> Path:
    """A Hugging Face hub cache holding `folder` as `repo`'s main snapshot."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo_dir = root / ("models--" + repo.replace("/", "--"))
    (repo_dir / "refs").mkdir(parents=True)
    (repo_dir / "refs" / "main").write_text(commit)
    shutil.copytree(folder, repo_dir / "snapshots" / commit)
    return root


def test_a_hub_id_loads_from_an_offline_cache_and_a_missing_one_is_one_line(tiny, tmp_path):
    """In a fresh interpreter: huggingface_hub reads HF_HUB_CACHE/HF_HUB_OFFLINE at import."""
    cache = hub_cache(tmp_path / "hub", "lloom-tests/tiny-llama", tiny)
    script = textwrap.dedent(
        """
        from backends.errors import BackendError
        from backends.mlx.backend import MLXBackend
        backend = MLXBackend("lloom-tests/tiny-llama")
        print(backend.model_name, backend.info.parameters)
        backend.close()
        try:
            MLXBackend("lloom-tests/not-here")
        except BackendError as e:
            print("ERROR", str(e))
        """
    )
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    loaded, error = done.stdout.splitlines()
    name, parameters = loaded.split()
    assert name == "lloom-tests/tiny-llama" and int(parameters) > 0
    assert error == (
        "ERROR mlx: model lloom-tests/not-here is not in the local Hugging Face cache; "
        "set LLOOM_MODEL to a folder"
    )


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ([], "holds a list, not a JSON object"),
        ("drop hidden_size", "does not describe a model mlx-lm can build"),
        ("hidden_size is text", "hidden_size is 'wide', not a number"),
        ("not json", "cannot read"),
        ({"hidden_size": 64}, "lacks model_type"),
    ],
)
def test_a_broken_config_json_is_one_clear_error_naming_the_file(tiny, tmp_path, config, says):
    folder = tmp_path / "broken"
    shutil.copytree(tiny, folder)
    good = json.loads((tiny / "config.json").read_text())
    path = folder / "config.json"
    if config == "drop hidden_size":
        path.write_text(json.dumps({k: v for k, v in good.items() if k != "hidden_size"}))
    elif config == "hidden_size is text":
        path.write_text(json.dumps({**good, "hidden_size": "wide"}))
    elif config == "not json":
        path.write_text("{hidden_size: 64")
    else:
        path.write_text(json.dumps(config))
    with pytest.raises(BackendError) as caught:
        MLXBackend(folder)
    message = str(caught.value)
    assert says in message and str(folder) in message, message
    assert "config.json" in message and "\n" not in message


def test_a_folder_that_is_not_there_is_one_line(tmp_path):
    with pytest.raises(BackendError) as caught:
        MLXBackend(tmp_path / "nowhere")
    assert str(caught.value) == (
        f"mlx: no model folder at {tmp_path / 'nowhere'} (LLOOM_MODEL / [mlx] model)"
    )


def test_the_backend_says_what_it_runs(tiny, tiny_4bit):
    plain = MLXBackend(tiny)
    try:
        info = plain.info
        assert (info.name, info.dtype, info.bits, info.dequantized) == (
            "tiny-llama",
            "float32",
            None,
            False,
        )
        assert info.memory_bytes == 4 * info.parameters
    finally:
        plain.close()
    fast = MLXBackend(tiny_4bit, dequantize_bytes=1 << 30)
    try:
        assert (fast.info.dtype, fast.info.bits, fast.info.dequantized) == ("float32", 4, True)
        assert fast.info.parameters == info.parameters
        assert fast.info.memory_bytes == info.memory_bytes
        assert "4-bit weights dequantized to float32" in fast.info.note
        assert " parameters · float32 (from 4-bit) · " in fast.model_facts
        assert fast.note is None  # nothing to warn of
    finally:
        fast.close()
    kept = MLXBackend(tiny_4bit, dequantize_bytes=0)
    try:
        assert (kept.info.bits, kept.info.dequantized) == (4, False)
        assert kept.info.memory_bytes < info.memory_bytes / 4
        assert "4-bit weights kept" in kept.info.note and "dequantize_mb = 0" in kept.info.note
        assert " parameters · 4-bit · " in kept.model_facts
        assert kept.note == kept.info.note  # the page shows it under the model's line
    finally:
        kept.close()


def broken_folder(tiny: Path, tmp_path: Path, how: str) -> Path:
    """A copy of `tiny` whose config.json is nested 100,000 deep, or has no heads."""
    folder = tmp_path / how
    shutil.copytree(tiny, folder)
    good = json.loads((tiny / "config.json").read_text())
    deep = "[" * 100_000 + "]" * 100_000
    text = deep if how == "deep" else json.dumps({**good, "num_attention_heads": 0})
    (folder / "config.json").write_text(text)
    return folder


@pytest.mark.parametrize(
    ("how", "says"),
    [
        ("deep", "config.json is JSON nested over 32 levels deep"),
        ("headless", "config.json: num_attention_heads is 0, not a size"),
    ],
)
def test_a_hostile_config_json_is_one_line_in_process_and_exit_2_on_the_command_line(
    tiny, tmp_path, how, says
):
    """A config.json nested 100,000 deep (RecursionError) or with num_attention_heads: 0
    (ZeroDivisionError in mlx-lm) gave a traceback and exit 1 (issue 31)."""
    folder = broken_folder(tiny, tmp_path, how)
    with pytest.raises(BackendError) as caught:
        MLXBackend(folder)
    assert says in str(caught.value) and str(folder) in str(caught.value)
    done = expand_with_model(str(folder))
    assert done.returncode == 2 and not done.stdout, done.stderr
    assert done.stderr.startswith("error: mlx") and says in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_a_model_hub_that_drops_the_connection_is_one_line_and_exit_2(tmp_path):
    """The hub (HF_ENDPOINT, a real loopback server here) closes every connection without
    an answer: a RemoteProtocolError traceback before (issue 31); now one line naming it."""

    class Dropping(BaseHTTPRequestHandler):
        def _drop(self):
            self.close_connection = True  # read the request, answer nothing

        do_GET = do_HEAD = do_POST = _drop

        def log_message(self, *args):
            pass

    hub = ThreadingHTTPServer(("127.0.0.1", 0), Dropping)
    threading.Thread(target=hub.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{hub.server_address[1]}"
    try:
        env = {"HF_ENDPOINT": url, "HF_HUB_OFFLINE": "0", "HF_HUB_CACHE": str(tmp_path)}
        done = expand_with_model("lloom-tests/far-away", env)
    finally:
        hub.shutdown()
        hub.server_close()
    assert done.returncode == 2 and not done.stdout, done.stderr
    assert done.stderr.startswith(f"error: mlx: the model hub at {url} failed while fetching")
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def expand_with_model(model: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`python -m weave expand` on the MLX backend with LLOOM_MODEL=`model`."""
    return subprocess.run(
        [sys.executable, "-m", "weave", "expand", "--story", "Once", "--backend", "mlx"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "LLOOM_MODEL": model, **(env or {})},
    )
