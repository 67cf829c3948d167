"""Steering reaches every backend: what each real server is sent for a steered search.

Each remote backend talks to its real server through a recording proxy
(tests/recording_proxy.py), so the prompts the server received are checked: the memory
first, the lorebook entries that fired next and those that did not absent, the author's
note as its own line at its depth, the context ending where the story ends; a story too
long for the model's window loses its start, never the memory, the lore or the note.
The MLX backend is checked on its own ids. The OpenAI backend meets llama.cpp's
OpenAI-compatible endpoints (no key to OpenAI's own exists here).
"""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

import pytest

from backends.llamacpp import LlamaCppBackend
from backends.openai import OpenAIBackend
from backends.vllm import VLLMBackend
from tests.recording_proxy import recording
from weave.search.beams import expand
from weave.search.params import SearchParams
from weave.story.context import Context
from weave.story.model_context import fitted_context, sent_ids
from weave.story.steering import LoreEntry, Steering

LONG_STORY = (Path(__file__).resolve().parent.parent / "bench" / "long_story.txt").read_text()
STORY = "The night was cold.\nThe wind howled over the moor.\nMira waited by the gate,"
MEMORY = "A dark tale of the moor, told plainly."
FIRES = LoreEntry(("Mira", "Tobin"), "Mira is a spy with red hair; Tobin is her brother.")
SLEEPS = LoreEntry(("dragon",), "Dragons sleep under the hill.")
STEERING = Steering(MEMORY, "[Keep it dark.]", 1, (SLEEPS, FIRES))
PARAMS = SearchParams(cutoff=0.1, max_depth=4, max_suggestions=6)


def check_text(text: str, story: str) -> None:
    """`text` is `story` steered by STEERING (note at depth 1), however much was cut."""
    assert text.startswith(f"{MEMORY}\n{FIRES.text}\n")
    assert SLEEPS.text not in text
    head, last = story.rsplit("\n", 1)
    assert text.endswith(f"{head[-200:]}\n[Keep it dark.]\n{last}")
    assert text.count("[Keep it dark.]") == 1


def prompts(bodies: list[dict]) -> list[list[int]]:
    """Every token-id prompt in completion requests asking log-probs (a body holds one, or
    a list): a search's, not the vLLM backend's question for its vocabulary at start."""
    out = []
    for body in (b for b in bodies if "logprobs" in b or "n_probs" in b):
        prompt = body["prompt"]
        out += prompt if prompt and isinstance(prompt[0], list) else [prompt]
    return out


def check_sent(received: list[list[int]], context: Context) -> None:
    """The shortest prompt is the context (after a BOS, where the model has one); every
    other one is the context and a beam."""
    ids = list(context.ids)
    shortest = min(received, key=len)
    assert shortest[-len(ids) :] == ids and len(shortest) - len(ids) <= 1
    bos = shortest[: len(shortest) - len(ids)]
    assert all(p[: len(shortest)] == shortest for p in received)
    assert bos == [] or bos[0] not in ids[:1]


# -- llama.cpp ------------------------------------------------------------------------------
@pytest.mark.parametrize("story", [STORY, LONG_STORY.rstrip() + "\nTobin said nothing,"])
def test_llamacpp_is_sent_the_steered_context(llama_url, story):
    with recording(llama_url) as proxy, closing(LlamaCppBackend(proxy.url)) as backend:
        context = fitted_context(backend, STEERING, story, room=PARAMS.max_depth)
        result = expand(backend, sent_ids(backend, context), PARAMS)
        read = backend.detokenize(list(context.ids))  # the text the model read
    assert result.suggestions
    check_text(context.text, story)
    check_text(read, story)
    check_sent(prompts(proxy.bodies("/completion")), context)
    if len(story) > 2000:  # longer than the slot's window: its start is cut
        assert context.left_out > 0
        assert context.token_count + PARAMS.max_depth <= backend.context_length
        assert not story.startswith(context.parts[2].text[:40])


# -- vLLM -----------------------------------------------------------------------------------
def test_vllm_is_sent_the_steered_context_trimmed_to_its_window(vllm_url):
    story = LONG_STORY.rstrip() + "\n\n" + LONG_STORY.rstrip() + "\nTobin said nothing,"
    with recording(vllm_url) as proxy, closing(VLLMBackend(proxy.url)) as backend:
        context = fitted_context(backend, STEERING, story, room=PARAMS.max_depth)
        result = expand(backend, sent_ids(backend, context), PARAMS)
    assert result.suggestions
    assert context.left_out > 0  # ~2,600 story tokens, a 2,048-token window
    assert context.token_count + PARAMS.max_depth <= backend.context_length
    check_text(context.text, story)
    check_sent(prompts(proxy.bodies("/v1/completions")), context)


# -- OpenAI (llama.cpp's OpenAI-compatible endpoints) ---------------------------------------
@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_openai_is_sent_the_steered_context_as_one_text(llama_url, endpoint):
    with recording(llama_url) as proxy:
        options = dict(api_key="EMPTY", model="smol", base_url=f"{proxy.url}/v1")
        with closing(OpenAIBackend(**options, endpoint=endpoint)) as backend:
            context = fitted_context(backend, STEERING, STORY, room=PARAMS.max_depth)
            result = expand(backend, sent_ids(backend, context), PARAMS)
    assert result.suggestions
    check_text(context.text, STORY)
    if endpoint == "chat":
        users = [
            m["content"]
            for body in proxy.bodies("/v1/chat/completions")
            for m in body["messages"]
            if m["role"] == "user"
        ]
        assert users and all(u.startswith(context.text) for u in users)
        assert context.text in users  # the first depth: the story alone
    else:
        texts = [body["prompt"] for body in proxy.bodies("/v1/completions")]
        assert texts and all(t.startswith(context.text) for t in texts)
        assert context.text in texts


# -- MLX ------------------------------------------------------------------------------------
def test_mlx_searches_the_steered_context(mlx_backend):
    context = fitted_context(mlx_backend, STEERING, STORY, room=PARAMS.max_depth)
    result = expand(mlx_backend, sent_ids(mlx_backend, context), PARAMS)
    assert result.suggestions and result.context_ids == context.ids
    check_text(mlx_backend.detokenize(list(result.context_ids)), STORY)


def test_mlx_trims_the_story_and_keeps_memory_lore_and_note(mlx_backend):
    story = "\n\n".join([LONG_STORY.rstrip()] * 8) + "\nTobin said nothing,"  # > 8,192 tokens
    context = fitted_context(mlx_backend, STEERING, story, room=PARAMS.max_depth)
    assert context.left_out > 0
    assert context.token_count + PARAMS.max_depth <= mlx_backend.context_length
    check_text(mlx_backend.detokenize(list(context.ids)), story)


def test_a_depth_past_the_window_is_one_error(mlx_backend):
    with pytest.raises(ValueError, match="does not fit the model's"):
        fitted_context(mlx_backend, STEERING, STORY, room=mlx_backend.context_length)
