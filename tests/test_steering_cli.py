"""Steering on the command line, end to end in a subprocess: `expand --memory --note
--note-depth --lore` against a real llama.cpp server (through a recording proxy, so the
prompt it received is checked), a SillyTavern world-info file read as the lorebook, and
`loom show --json` / `loom export` / `loom import` carrying a story's steering."""

from __future__ import annotations

import json
from contextlib import closing
from pathlib import Path

from backends.llamacpp import LlamaCppBackend
from tests.recording_proxy import recording
from tests.test_cli import loom, one_error_line, weave
from tests.test_steering_backends import prompts
from weave.interop.files import export_json
from weave.loom.store import LoomStore
from weave.story.model_context import fitted_context
from weave.story.steering import LoreEntry, Steering, steering_in, with_steering

STORY = "The night was cold.\nThe wind howled over the moor.\nMira waited by the gate,"
WORLD_INFO = {
    "entries": {
        "0": {"uid": 0, "key": ["dragon"], "content": "Dragons sleep under the hill.",
              "comment": "Dragons", "disable": False, "order": 100},
        "1": {"uid": 1, "key": ["Mira"], "content": "Mira is a spy with red hair.",
              "comment": "Mira", "disable": False, "order": 200, "selective": True,
              "keysecondary": [], "caseSensitive": None, "matchWholeWords": None},
        "2": {"uid": 2, "key": ["moor"], "content": "The moor is haunted.", "disable": True},
    }
}  # fmt: skip
STEERING = Steering(
    memory="A dark tale.",
    note="[Keep it dark.]",
    note_depth=2,
    lore=(LoreEntry(("Mira",), "Mira is a spy.", name="Mira"), LoreEntry(("x",), "X", False)),
)


def test_expand_sends_memory_note_and_sillytavern_lore(llama_url, tmp_path):
    book = tmp_path / "world.json"
    book.write_text(json.dumps(WORLD_INFO))
    with recording(llama_url) as proxy:
        done = weave(
            "expand", "--story", STORY, "--backend", "llamacpp", "--max-depth", "3",
            "--memory", "A dark tale.", "--note", "[Keep it dark.]", "--note-depth", "2",
            "--lore", str(book), "--json",
            env={"LLAMA_API_URL": proxy.url},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        with closing(LlamaCppBackend(llama_url)) as backend:
            read = [backend.detokenize(p) for p in prompts(proxy.bodies("/completion"))]
            steering = ("A dark tale.", "[Keep it dark.]", 2)
            fired = (LoreEntry(("Mira",), "Mira is a spy with red hair.", name="Mira"),)
            expected = fitted_context(backend, Steering(*steering, fired), STORY, room=3).text
    assert expected == (
        "A dark tale.\nMira is a spy with red hair.\nThe night was cold.\n[Keep it dark.]\n"
        "The wind howled over the moor.\nMira waited by the gate,"
    )  # the dragon did not fire; the moor's entry is switched off
    assert min(read, key=len) == expected
    assert all(text.startswith(expected) for text in read)
    out = json.loads(done.stdout)
    assert out["suggestions"]
    recorded = Steering.from_dict(out["steering"])  # the search records what steered it
    assert (recorded.memory, recorded.note, recorded.note_depth) == steering[:3]
    assert recorded.lore == fired  # only what was in force: the entry that fired


def test_bad_steering_options_are_one_line_naming_them(tmp_path):
    junk = tmp_path / "junk.json"
    junk.write_text('{"entries": {"0": {"key": "Mira"}}}')
    done = weave("expand", "--story", STORY, "--lore", str(junk))
    assert one_error_line(done).startswith(f"error: {junk}: entries['0'].key must be a list")
    done = weave("expand", "--story", STORY, "--lore", str(tmp_path / "absent.json"))
    assert "absent.json: cannot read it" in one_error_line(done)
    done = weave("expand", "--story", STORY, "--note-depth", "0")
    assert one_error_line(done).startswith("error: --note-depth must be a whole number in 1..")
    done = weave("expand", "--story", STORY, "--memory", "m" * 20_001)
    assert one_error_line(done) == "error: --memory holds at most 20,000 characters"


def test_loom_show_export_and_import_carry_the_steering(tmp_path):
    store = LoomStore(tmp_path)
    sid, _ = store.create(STORY)
    store.save_settings(sid, with_steering({"cutoff": 0.1}, STEERING))
    shown = loom(tmp_path, "show", sid, "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["steering"] == STEERING.to_dict()
    exported = loom(tmp_path, "export", sid)
    file = tmp_path / "story.json"
    file.write_text(exported.stdout)
    copy = loom(tmp_path, "import", str(file)).stdout.strip()
    assert steering_in(store.settings(copy)) == STEERING
    assert store.settings(copy)["cutoff"] == 0.1
    plain, _ = store.create("Once")
    assert json.loads(loom(tmp_path, "show", plain, "--json").stdout)["steering"] == {
        "memory": "", "note": "", "note_depth": 3, "lore": []
    }  # fmt: skip


def test_an_import_with_unreadable_steering_is_one_error_naming_the_field(tmp_path):
    store = LoomStore(tmp_path)
    sid, _ = store.create(STORY)
    store.save_settings(sid, with_steering({}, STEERING))
    doc = json.loads(export_json(store, sid))
    doc["settings"]["steering"]["lore"][0]["keys"] = "Mira"
    file = tmp_path / "bad.json"
    file.write_text(json.dumps(doc))
    done = loom(tmp_path, "import", str(file))
    assert one_error_line(done) == (
        f"error: {file} cannot be imported: steering: lore[0].keys must be a list of text"
    )
    assert [s.id for s in store.stories()] == [sid]  # nothing half-imported


def test_export_without_steering_writes_none(tmp_path: Path):
    store = LoomStore(tmp_path)
    sid, _ = store.create(STORY)
    store.save_settings(sid, with_steering({"cutoff": 0.1}, Steering()))
    assert "steering" not in json.loads(export_json(store, sid))["settings"]
