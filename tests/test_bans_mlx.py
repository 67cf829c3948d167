"""Bans on the real model (the embedded SmolLM2-135M on MLX): a phrase the search offers
without a ban never appears with it, the count of suggestions holds, and the command
line reports what it pruned."""

from __future__ import annotations

import json

from tests.test_cli import weave
from weave.search.beams import SearchParams, expand
from weave.story.bans import BanRule, Bans, Guard

STORY = "The old dragon opened its eyes and"


def search(backend, bans: Bans | None):
    guard = Guard(bans, STORY) if bans is not None else None
    return expand(backend, backend.tokenize(STORY), SearchParams(), guard=guard)


def test_a_banned_phrase_the_model_offers_never_appears(mlx_backend):
    plain = search(mlx_backend, None)
    assert any("looked" in s.text for s in plain.suggestions)  # the model's favourite
    banned = search(mlx_backend, Bans((BanRule("looked"), BanRule("at the", weight=-3.0))))
    assert banned.pruned and all(p.by == "looked" for p in banned.pruned)
    assert not any("looked" in s.text.lower() for s in banned.suggestions)
    assert not any("looked" in leaf.full_text() for leaf in banned.tree.leaves())
    assert len(banned.suggestions) >= 0.95 * len(plain.suggestions)


def test_the_command_line_bans_and_reports_what_it_pruned(tmp_path):
    listed = tmp_path / "bans.json"
    listed.write_text(json.dumps([["looked", None], ["up", -2.0]]))
    done = weave("expand", "--story", STORY, "--ban-file", str(listed), "--ban", "stared",
                 "--no-repeat-words", "3", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["pruned"] == len(out["pruned_branches"]) > 0
    assert {b["by"] for b in out["pruned_branches"]} <= {"looked", "stared"}
    assert not any("looked" in s["text"] or "stared" in s["text"] for s in out["suggestions"])
    bad = weave("expand", "--story", STORY, "--ban-regex", "(unclosed")
    assert bad.returncode == 2
    assert bad.stderr.startswith("error: --ban-regex #1 ('(unclosed') is not a valid regular")
