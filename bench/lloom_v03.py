"""LLooM v0.3's way of asking a server, for the benchmarks to compare against.

v0.3 builds each prompt as a string (the story plus the token texts of the beam so
far) and sends one request per beam per token, from a pool of threads (its
LLAMA_PIPELINE_REQUESTS). Token strings stand in for ids, interned per instance, so the
same search code can drive it. Subclasses say how one prompt is asked.
"""

from __future__ import annotations

from abc import abstractmethod
from concurrent.futures import ThreadPoolExecutor

from backends.base import Backend, Candidate
from backends.http import JsonClient


class StringPromptBackend(Backend):
    name = "lloom-v0.3"
    model_name = "the same server"

    def __init__(self, url: str, threads: int):
        super().__init__()
        self.client = JsonClient(url, backend=self.name, timeout=60, pool=threads)
        self.threads = threads
        self.strings: list[str] = []
        self.ids: dict[str, int] = {}

    def tokenize(self, text: str) -> list[int]:
        return [self.intern(text)]

    def detokenize(self, ids: list[int]) -> str:
        return "".join(self.strings[i] for i in ids)

    def top_logprobs(self, contexts: list[list[int]], k: int) -> list[list[Candidate]]:
        prompts = [self.detokenize(ctx) for ctx in contexts]  # story + tokens, as strings
        with ThreadPoolExecutor(self.threads) as pool:
            answers = list(pool.map(self.ask, prompts))
        self.stats.add(forward_calls=len(prompts))
        return answers

    @abstractmethod
    def ask(self, prompt: str) -> list[Candidate]:
        """One request: the next-token candidates after `prompt`, most likely first."""

    def intern(self, text: str) -> int:
        if text not in self.ids:
            self.ids[text] = len(self.strings)
            self.strings.append(text)
        return self.ids[text]
