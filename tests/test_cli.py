"""`python -m weave` end to end, in a subprocess: `expand` on the real embedded model, and
`loom` on a real store in a temporary data folder."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from weave.bounds import bound_of
from weave.loom_store import LoomStore
from weave.search import SearchParams

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
    assert set(out) == {"params", "steering", "suggestions", "tree", "stats", "context_tokens"}
    assert out["steering"] == {"memory": "", "note": "", "note_depth": 3, "lore": []}
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
    # No auto-stop: full depth, after the word " the" given back to heal (weave.healing).
    assert all(len(s["token_ids"]) == 5 + s["healed"] for s in suggestions)
    assert json.loads(done.stdout)["typed"] == " the"


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


def one_error_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2 and not done.stdout
    [line] = done.stderr.splitlines()
    return line


def test_an_option_outside_its_bounds_is_one_line_naming_it():
    for option, value, expected in (
        ("--max-suggestions", "300", "--max-suggestions must be a whole number in 1..100, not 300"),
        ("--max-suggestions", "0", "--max-suggestions must be a whole number in 1..100, not 0"),
        ("--cutoff", "nan", "--cutoff must be in 0..1, not nan"),
        ("--multiplier", "inf", "--multiplier must be in 0..2, not inf"),
    ):
        assert (
            one_error_line(weave("expand", "--story", "x", option, value)) == f"error: {expected}"
        )


def test_the_help_states_the_bounds_the_search_checks():
    done = weave("expand", "--help")
    assert done.returncode == 0
    shown = " ".join(done.stdout.split())
    for name in ("cutoff", "multiplier", "split_limit", "max_depth", "max_suggestions"):
        assert f"({bound_of(SearchParams, name)})" in shown, name
    assert "(1..100)" in shown and "{joint,lloom}" in shown


def test_settings_out_of_range_are_one_line_naming_where_they_came_from(tmp_path):
    for variable, value in (("LLAMA_TIMEOUT", "1e10"), ("VLLM_TIMEOUT", "1e10"),
                            ("OPENAI_TIMEOUT", "1e12")):  # fmt: skip
        line = one_error_line(weave("expand", "--story", "x", env={variable: value}))
        assert line.startswith(f"error: {variable} must be in 0.1..3600 s, not 1"), line
    for device in ("/dev/zero", "/dev/urandom"):
        line = one_error_line(weave("expand", "--story", "x", env={"LLOOM_CONFIG": device}))
        assert line == f"error: {device} is longer than 1 MiB: not a settings file"
    config = tmp_path / "config.toml"
    config.write_text("[openai]\nendpoint = 'x'\n")
    line = one_error_line(weave("expand", "--story", "x", env={"LLOOM_CONFIG": str(config)}))
    assert line == (f"error: {config} [openai] endpoint must be one of 'auto', 'chat', "
                    "'completions', not 'x'")  # fmt: skip
    config.write_text("[mlx]\nbatch_window_ms = 1e9\n")  # once: a second writer waited forever
    line = one_error_line(weave("expand", "--story", "x", env={"LLOOM_CONFIG": str(config)}))
    assert line.startswith(f"error: {config} [mlx] batch_window_ms must be in 0..200 ms")


# -- python -m weave loom ------------------------------------------------------------------
def loom(data: Path, *args: str) -> subprocess.CompletedProcess:
    return weave("loom", *args, env={"LLOOM_DATA_DIR": str(data)})


def test_loom_list_and_show_print_what_scripts_rely_on(tmp_path):
    store = LoomStore(tmp_path)
    sid, start = store.create("Once upon a time,")
    loom_now = store.update(sid, lambda lm: lm.keep(" a fox").accept(" 🐉").bookmark(lm.cursor))
    listed = loom(tmp_path, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)
    assert row == {"id": sid, "title": "Once upon a time,", "nodes": 4,
                   "updated": store.info(sid).updated}  # fmt: skip
    shown = loom(tmp_path, "show", sid, "--json")
    assert shown.returncode == 0, shown.stderr
    out = json.loads(shown.stdout)
    assert set(out) == {"id", "title", "cursor", "nodes", "bookmarks", "steering"}
    assert (out["id"], out["cursor"], out["bookmarks"]) == (sid, loom_now.cursor, [start.cursor])
    assert out["nodes"] == [
        {"id": n.id, "parent": n.parent, "text": n.text, "kind": n.kind}
        for n in loom_now.nodes.values()
    ]
    assert [n["text"] for n in out["nodes"]] == ["", "Once upon a time,", " a fox", " 🐉"]


def test_loom_export_then_import_round_trips(tmp_path):
    store = LoomStore(tmp_path)
    sid, _ = store.create("The forest", token_ids=(1, 2), model="m")
    store.update(sid, lambda lm: lm.accept(" seemed", score=-1.0).undo().keep(" was"))
    store.save_settings(sid, {"cutoff": 0.1})
    exported = loom(tmp_path, "export", sid)
    assert exported.returncode == 0, exported.stderr
    file = tmp_path / "f.json"
    file.write_text(exported.stdout)
    imported = loom(tmp_path, "import", str(file))
    assert imported.returncode == 0, imported.stderr
    copy = imported.stdout.strip()
    assert copy != sid and store.load(copy) == store.load(sid)
    again = json.loads(loom(tmp_path, "export", copy).stdout)
    first = json.loads(exported.stdout)
    for doc in (first, again):
        del doc["id"], doc["updated"]
    assert again == first


def test_loom_errors_are_one_clear_line(tmp_path):
    LoomStore(tmp_path)
    missing = loom(tmp_path, "show", "nope", "--json")
    assert missing.returncode == 2 and missing.stderr.startswith("error: no story nope")
    junk = tmp_path / "junk.json"
    junk.write_text("[1, 2]")
    done = loom(tmp_path, "import", str(junk))
    assert done.returncode == 2 and "not a LLooM file" in done.stderr
    endless = loom(tmp_path, "import", "/dev/zero")  # read up to the cap, not forever
    assert endless.returncode == 2 and endless.stderr.count("\n") == 1
    assert "/dev/zero is longer than 256 MiB" in endless.stderr
    assert json.loads(loom(tmp_path, "list", "--json").stdout) == []
