"""`python -m weave expand` end to end, in a subprocess, on the real embedded model."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def weave(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "weave", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def test_expand_json_on_the_embedded_model():
    done = weave("expand", "--story", "Once upon a time,", "--max-depth", "6", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert set(out) == {"suggestions", "tree", "stats"}
    suggestions = out["suggestions"]
    assert 10 <= len(suggestions) <= 25  # the embedded model's defaults give real choice
    for s in suggestions:
        assert set(s) >= {"text", "token_ids", "logprob", "probability"}
        assert 1 <= len(s["token_ids"]) <= 6
    scores = [s["score"] for s in suggestions]
    assert scores == sorted(scores, reverse=True)
    stats = out["stats"]
    assert stats["backend"] == "mlx" and stats["model"] == "SmolLM2-135M-Instruct"
    assert stats["prefill_tokens"] == 5  # "Once upon a time," is 5 tokens
    assert stats["model_tokens"] >= stats["prefill_tokens"] + len(suggestions)
    first_words = {child["text"] for child in out["tree"]["children"]}
    assert " the" in first_words


def test_expand_every_option_from_a_file(tmp_path):
    story = tmp_path / "story.txt"
    story.write_text("In the age before man, 🐉 the", encoding="utf-8")
    done = weave(
        "expand", "--story-file", str(story), "--cutoff", "0.2", "--multiplier", "1.0",
        "--split-limit", "3", "--max-depth", "5", "--max-suggestions", "7", "--no-auto-stop",
        "--score", "lloom", "--backend", "mlx", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    suggestions = json.loads(done.stdout)["suggestions"]
    assert 1 <= len(suggestions) <= 7
    assert all(len(s["token_ids"]) == 5 for s in suggestions)  # no auto-stop: full depth


def test_readable_output_ranks_and_summarises():
    done = weave("expand", "--story", "Once upon a time,", "--max-depth", "3")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0].lstrip().startswith("1.")
    assert "suggestions in" in lines[-1] and "prefill tokens" in lines[-1]


def test_errors_are_one_clear_line(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dead = weave("expand", "--story", "x", env={"LLAMA_API_URL": f"http://127.0.0.1:{port}"})
    assert dead.returncode == 2
    assert dead.stderr.startswith("error: llamacpp") and f"127.0.0.1:{port}" in dead.stderr
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("caf\xe9".encode("latin-1"))
    done = weave("expand", "--story-file", str(bad))
    assert done.returncode == 2 and "not UTF-8" in done.stderr
    empty = weave("expand", "--story", "")
    assert empty.returncode == 2 and "empty" in empty.stderr
    typo = tmp_path / "config.toml"
    typo.write_text("[search]\ncutof = 0.2\n")
    done = weave("expand", "--story", "x", env={"LLOOM_CONFIG": str(typo)})
    assert done.returncode == 2 and "'cutof'" in done.stderr


def test_command_line_mistakes_are_one_line_too():
    for args in (["expand"], ["expand", "--story", "x", "--max-depth", "many"], ["nonsense"], []):
        done = weave(*args)
        assert done.returncode == 2 and not done.stdout
        [line] = done.stderr.splitlines()
        assert line.startswith("error: ") and "--help" in line


def test_a_story_file_without_end_is_refused_without_reading_it_all():
    done = weave("expand", "--story-file", "/dev/zero")
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith("error: /dev/zero is longer than 4 MiB")
