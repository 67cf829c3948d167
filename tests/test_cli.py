"""`python -m weave` end to end, in a subprocess: `expand` on the real embedded model, and
`loom` on a real store in a temporary data folder."""

from __future__ import annotations

import json
import math
import os
import re
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from tests.fake_backend import VOCAB, FakeBackend
from tests.test_rows import assert_openings_first
from weave.bounds import bound_of
from weave.cli import to_text
from weave.config import load_settings
from weave.loom.store import LoomStore
from weave.search.beams import OVERRUN, expand
from weave.search.params import SearchParams
from weave.search.tree import Suggestion

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
    assert set(out) == {"params", "steering", "suggestions", "tree", "stats", "context_tokens",
                        "pruned", "pruned_branches", "notes"}  # fmt: skip
    assert out["pruned"] == 0 and out["pruned_branches"] == []  # no bans given
    assert out["notes"] == []  # nothing the search could not do
    assert out["steering"] == {"memory": "", "note": "", "note_depth": 3, "lore": []}
    suggestions = out["suggestions"]
    assert 10 <= len(suggestions) <= 25  # the embedded model's defaults give real choice
    for s in suggestions:
        assert set(s) >= {"text", "token_ids", "logprob", "probability"}
        assert 1 <= len(s["token_ids"]) <= 6 + OVERRUN  # past 6 only to reach a word
    assert_openings_first([Suggestion(**s) for s in out["suggestions"]])
    stats = out["stats"]
    assert stats["backend"] == "mlx" and stats["model"] == "SmolLM2-135M-Instruct"
    assert stats["prefill_tokens"] == 5  # "Once upon a time," is 5 tokens
    assert stats["model_tokens"] >= stats["prefill_tokens"] + len(suggestions)
    first_words = {child["text"] for child in out["tree"]["children"]}
    assert " the" in first_words
    # What the suggestions are worth: their mass is the tree's finished leaves' (exact).
    leaves = list(finished_leaves(out["tree"], 0.0))
    exact = math.fsum(math.exp(lp) for lp in leaves)  # the tree's log-probs have 6 decimals
    assert stats["mass_covered"] == pytest.approx(exact, rel=1e-4)
    assert 0 < stats["mass_covered"] <= 1
    assert 1 <= stats["effective_choices"] <= len(suggestions)
    assert stats["sampling_equivalent_n"] >= 1


def finished_leaves(node: dict, logprob: float):
    """The joint log-probability of each finished beam under `node` (the JSON tree)."""
    logprob += node["logprob"]
    if node.get("finished"):
        yield logprob
    for child in node.get("children", []):
        yield from finished_leaves(child, logprob)


def test_expand_every_option_from_a_file(tmp_path):
    story = tmp_path / "story.txt"
    story.write_text("In the age before man, 🐉 the", encoding="utf-8")
    done = weave(
        "expand", "--story-file", str(story), "--rule", "v03", "--cutoff", "0.2",
        "--multiplier", "1.0",
        "--split-limit", "3", "--max-depth", "5", "--max-suggestions", "7", "--no-auto-stop",
        "--score", "lloom", "--backend", "mlx", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    suggestions = json.loads(done.stdout)["suggestions"]
    assert 1 <= len(suggestions) <= 7
    # No auto-stop: full depth, after the word " the" given back to heal (it may be a word
    # begun, as "theatre" is: weave.search.healing), or a few tokens more to end a
    # character begun (an emoji takes several) rather than show half of it.
    for s in suggestions:
        assert 5 + s["healed"] <= len(s["token_ids"]) <= 5 + s["healed"] + OVERRUN
        assert "\ufffd" not in s["text"]
    assert json.loads(done.stdout)["params"]["rule"] == "v03"
    assert json.loads(done.stdout)["typed"] == " the"


def test_readable_output_ranks_and_summarises():
    done = weave("expand", "--story", "Once upon a time,", "--max-depth", "3")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0].lstrip().startswith("1.")
    rows = [line for line in lines if re.match(r" *\d+\. ", line)]
    for row in rows:  # each row's share and probability read as something, never "0.00%"
        share, _p, probability = row.split()[1:4]
        assert share.endswith("%") and float(share.strip("<%")) > 0
        assert probability.endswith("%") and float(probability.strip("<%")) > 0
    assert "ranked by words; " in lines[-2] and "effective choices" in lines[-2]
    assert "suggestions in" in lines[-1] and "prefill tokens" in lines[-1]
    # each row's figure is the page's: its share of the ranking score, all adding up to 100%
    assert lines[-3].startswith("Figures: each suggestion's share")
    shares = [float(row.split()[1].strip("<%")) for row in rows]
    assert shares[0] == max(shares) and abs(sum(shares) - 100) < 0.1 * len(shares)
    assert shares[0] > 1


def test_readable_output_names_the_texts_a_row_stands_for():
    params = SearchParams(max_depth=2, max_suggestions=3)
    result = expand(FakeBackend(seed=5), [VOCAB.index("x")], params)
    first, *others = result.suggestions
    wife = replace(
        first, text=" want of a wife,", variants=(" want of a wife.", "\nwant of a wife")
    )
    lines = to_text(replace(result, suggestions=[wife, *others]), params).splitlines()
    assert lines[0].endswith(r"' want of a wife,'  (also ' want of a wife.', '\nwant of a wife')")
    assert "also" not in lines[1]  # a row that stands for no other text says nothing more


def test_a_reader_that_stops_early_ends_it_quietly(tmp_path):
    """`python -m weave ... | head`: the pipe closes before the output is written."""
    LoomStore(tmp_path).create("Once upon a time,")
    for args in (["expand", "--story", "Once upon a time,", "--max-depth", "2"],
                 ["loom", "list"]):  # fmt: skip
        process = subprocess.Popen(
            [sys.executable, "-m", "weave", *args], cwd=ROOT, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env={**os.environ, "LLOOM_DATA_DIR": str(tmp_path)},
        )  # fmt: skip
        process.stdout.close()  # the reader has gone before the first line
        assert process.wait(timeout=300) == 0, args
        assert process.stderr.read() == b"", args
        process.stderr.close()


def test_an_unknown_or_shortened_option_is_refused_by_name():
    line = one_error_line(weave("expand", "--story", "x", "--cut", "0.3"))
    assert line.startswith("error: unrecognized arguments: --cut 0.3"), line
    line = one_error_line(weave("loom", "list", "--jsn"))
    assert "--jsn" in line, line


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
        ("--multiplier", "inf", "--multiplier must be in 0..10, not inf"),
    ):
        assert (
            one_error_line(weave("expand", "--story", "x", option, value)) == f"error: {expected}"
        )


def test_the_help_states_the_bounds_the_search_checks():
    done = weave("expand", "--help")
    assert done.returncode == 0
    shown = " ".join(done.stdout.split())
    settings = load_settings()
    for name in ("cutoff", "multiplier", "split_limit", "max_depth", "max_suggestions"):
        expected = f"({bound_of(SearchParams, name)}; default: {getattr(settings.search, name)})"
        assert expected in shown, name
    assert "(1..100; default: 25)" in shown and "{words,joint,lloom}" in shown
    assert "(default: words)" in shown and "(default: yes)" in shown
    assert "(1..1,000; default: 3)" in shown  # --note-depth
    assert "--rule {relative,v03}" in shown and "(default: relative)" in shown


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
        {"id": n.id, "parent": n.parent, "text": n.text, "kind": n.kind,
         "provenance": {"how": "unknown"}}  # made by the store alone: no one said how
        for n in loom_now.nodes.values()
    ]  # fmt: skip
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
    assert again.pop("title") == "The forest (2)"  # the copy is told apart from the first
    assert first.pop("title") is None  # its first line
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


def test_loom_show_draws_a_child_under_its_parent(tmp_path):
    store = LoomStore(tmp_path)
    sid, _ = store.create("Once upon a time,")
    steps = lambda lm: (lm.accept(" there").accept(" was").undo()  # noqa: E731
                        .accept(" lived").accept(" a fox").undo().undo().keep(" were"))  # fmt: skip
    loom_now = store.update(sid, steps)
    done = loom(tmp_path, "show", sid)
    assert done.returncode == 0, done.stderr
    by_text = {n.text: n.id for n in loom_now.nodes.values()}
    expected = [
        "   {}",
        "   ↳ {Once upon a time,}",
        "*  ↳ { there}",  # the only child of the opening: the same column, drawn ↳
        "     ├─ { was}",  # three children: one level in, joined
        "     ├─ { lived}",
        "     │  ↳ { a fox}",  # a child of " lived", not a sibling of it
        "     └─ { were}",
    ]
    lines = [
        line.replace(f"{node} {text!r}", "{" + text + "}")
        for line, (text, node) in zip(
            done.stdout.splitlines(),
            sorted(by_text.items(), key=lambda item: done.stdout.index(item[1])),
            strict=True,
        )
    ]
    assert lines == expected


def test_a_mistyped_option_is_named_before_anything_else():
    done = weave("expand", "--stroy", "x")
    assert done.returncode == 2
    assert (
        done.stderr
        == "error: unrecognized arguments: --stroy x (see python -m weave expand --help)\n"
    )
    listed = weave("loom", "list", "--jsn")
    assert listed.stderr.startswith("error: unrecognized arguments: --jsn")
