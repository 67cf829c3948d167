"""A story's steering through a tab (`weave.desk.session.Workspace`) on the real MLX backend:
kept with the story, sent with every search, recorded with each search, and free to
accept under memory (0 prefill tokens); alternatives index the story's own tokens."""

from __future__ import annotations

from dataclasses import replace

from weave.desk.alternatives import branch_text
from weave.desk.session import Workspace
from weave.loom.store import LoomStore
from weave.search.codec import search_steering
from weave.search.params import SearchParams
from weave.story.steering import LoreEntry, Steering

STORY = "The night was cold.\nThe fox crept to the well.\nThere,"
STEERING = Steering(
    memory="A fable in the old style.",
    lore=(LoreEntry(("fox",), "The fox is a trickster."), LoreEntry(("owl",), "The owl.")),
)
NOTED = Steering(STEERING.memory, "[Keep it dark.]", 1, STEERING.lore)
PARAMS = SearchParams(cutoff=0.1, max_depth=4, max_suggestions=8, auto_stop=False)


def opened(tmp_path, steering: Steering) -> Workspace:
    ws = Workspace(LoomStore(tmp_path))
    assert ws.start(STORY)
    ws.set_settings(replace(ws.settings, steering=steering))
    return ws


def test_accepting_under_memory_costs_no_prefill(tmp_path, fresh_mlx_backend):
    backend = fresh_mlx_backend
    for steering in (STEERING, NOTED):
        ws = opened(tmp_path, steering)
        first = ws.offers.suggest(backend, ws.spot, PARAMS)
        context = ws.offers.context(backend, ws.spot, room=PARAMS.max_depth)
        assert first.result.context_ids == context.ids
        assert context.parts[0].text == "A fable in the old style.\n"
        assert [e.label for e in context.fired] == ["fox"]
        taken = next(s for s in first.result.suggestions if s.exact and "\n" not in s.text)
        ws.accept(first.piece(taken), None, prefix_space=True)
        again = ws.offers.suggest(backend, ws.spot, PARAMS)
        assert again.result.stats.prefill_tokens == 0, steering.note
        accepted, searched = context.ids + taken.token_ids, again.result.context_ids
        assert accepted[: len(searched)] == searched  # less any word given back to heal
        assert backend.detokenize(list(accepted[len(searched) :])) == again.result.typed


def test_steering_is_kept_with_the_story_and_each_search(tmp_path, mlx_backend):
    ws = opened(tmp_path, STEERING)
    # the page's search settings keep the steering
    ws.set_settings(replace(ws.settings, record={"cutoff": 0.1}))
    offer = ws.offers.suggest(mlx_backend, ws.spot, PARAMS)
    saved = ws.store.suggestions(ws.story_id, ws.cursor)
    assert search_steering(saved) == STEERING.in_force(STORY)  # the owl's entry did not fire
    assert [e.label for e in search_steering(saved).lore] == ["fox"]
    again = Workspace(ws.store)
    assert again.open(ws.story_id) and again.settings.steering == STEERING
    model = mlx_backend.model_name
    assert again.offers.offer(again.spot, PARAMS, model=model).result.suggestions == (
        offer.result.suggestions
    )
    # made under other steering: not this one's
    again.set_settings(replace(again.settings, steering=NOTED))
    assert again.offers.offer(again.spot, PARAMS, model=model) is None
    assert again.offers.show(mlx_backend, again.spot, PARAMS).source == "searched"
    again.set_settings(replace(again.settings, steering=STEERING))
    assert again.offers.offer(again.spot, PARAMS, model=model) is not None
    asleep = LoreEntry(("dragon",), "A dragon sleeps.")  # an entry that does not fire here
    again.set_settings(
        replace(again.settings, steering=Steering(STEERING.memory, lore=(*STEERING.lore, asleep)))
    )
    assert again.offers.offer(again.spot, PARAMS, model=model) is not None
    assert Workspace(ws.store).open(ws.story_id)
    assert ws.store.settings(ws.story_id)["cutoff"] == 0.1


def test_alternatives_index_the_storys_own_tokens(tmp_path, mlx_backend):
    ws = opened(tmp_path, NOTED)
    shown = ws.offers.alternatives(mlx_backend, ws.spot, k=4, last=64)
    assert shown.rows and shown.error is None
    assert "".join(row.text for row in shown.rows) == STORY  # no memory, lore or note
    context = ws.offers.context(mlx_backend, ws.spot, room=0)
    assert shown.rows[0].position == context.prefix_len  # the story's first token
    row = shown.rows[-1]
    choice = next(c for c in row.top if c.token_id != row.token_id)
    assert branch_text(ws.text, shown.rows, row, choice) == STORY[: -len(row.text)] + choice.text
