"""The token tree a search grows, and the suggestions read off its leaves.

A `TreeNode` is one token on one beam; the root stands for the story. This module owns
the tree's shape, its text (bytes joined once, so split UTF-8 characters come out whole),
its JSON form and the ranked `Suggestion` list, pooled under LLooM's prefix-space
rule. It does not search (`weave.search.beams`) or draw (`weave.view.render`).
"""

from __future__ import annotations

import codecs
import math
from dataclasses import dataclass, field

from weave.search import scores
from weave.search.scores import Score


@dataclass(eq=False)
class TreeNode:
    """One token of a beam. `cut` is set when auto-stop cut the beam's text inside it."""

    token_id: int | None
    piece: bytes
    logprob: float
    parent: TreeNode | None = None
    children: list[TreeNode] = field(default_factory=list)
    finished: bool = False
    cut: int | None = None  # characters of the beam's text kept, when auto-stop cut it
    open: bool = False  # the token leaves a character its backend holds back (`Candidate.open`)

    @property
    def depth(self) -> int:
        return 0 if self.parent is None else self.parent.depth + 1

    @property
    def probability(self) -> float:
        return math.exp(self.logprob)

    def add_child(self, token_id: int, piece: bytes, logprob: float, *, open: bool = False):
        child = TreeNode(token_id, piece, logprob, parent=self, open=open)
        self.children.append(child)
        return child

    def path(self) -> list[TreeNode]:
        """The beam's nodes from the first token to this one (the root excluded)."""
        nodes: list[TreeNode] = []
        node: TreeNode | None = self
        while node is not None and node.parent is not None:
            nodes.append(node)
            node = node.parent
        return nodes[::-1]

    def token_ids(self) -> list[int]:
        return [n.token_id for n in self.path()]

    def piece_path(self) -> bytes:
        """The beam's bytes so far."""
        return b"".join(n.piece for n in self.path())

    def full_text(self) -> str:
        """The beam's text, uncut, up to its last whole character: of a character whose
        bytes the beam has only begun (a token holding part of them), nothing shows."""
        return _decoded(self.piece_path())[0]

    def whole(self) -> bool:
        """Whether the beam ends where a character ends: its bytes do, and its backend
        holds no part of one back."""
        return _decoded(self.piece_path())[1] and not self.open

    def text(self) -> str:
        """The beam's text as offered: cut just after the stop string when auto-stop fired."""
        full = self.full_text()
        return full if self.cut is None else full[: self.cut]

    def leaves(self) -> list[TreeNode]:
        if not self.children:
            return [self] if self.parent is not None else []
        return [leaf for child in self.children for leaf in child.leaves()]

    def descendants(self) -> int:
        """How many nodes lie below this one. Below a search's root, every one is a token
        a server must evaluate once: with the story, the least a search can cost it."""
        return sum(1 + child.descendants() for child in self.children)

    def to_dict(self) -> dict:
        """JSON form: piece text, id, log-prob, children (the root has no token)."""
        out: dict = {
            "token_id": self.token_id,
            "text": self.piece.decode("utf-8", errors="replace"),
            "logprob": round(self.logprob, 6),
            "probability": round(self.probability, 6),
        }
        if self.piece and _partial(self.piece):
            out["bytes"] = list(self.piece)  # half a character: its text alone cannot say it
        if self.cut is not None:
            out["cut"] = self.cut
        if self.open:
            out["open"] = True
        if self.finished:
            out["finished"] = True
        if self.children:
            out["children"] = [child.to_dict() for child in self.children]
        return out

    @classmethod
    def from_dict(cls, data: dict, parent: TreeNode | None = None) -> TreeNode:
        raw = data.get("bytes")
        node = cls(
            data.get("token_id"),
            bytes(raw) if raw is not None else data.get("text", "").encode("utf-8"),
            float(data.get("logprob", 0.0)),
            parent=parent,
            finished=bool(data.get("finished", False)),
            cut=data.get("cut"),
            open=bool(data.get("open", False)),
        )
        node.children = [cls.from_dict(child, node) for child in data.get("children", [])]
        return node


def _decoded(data: bytes) -> tuple[str, bool]:
    """`data` as text up to its last whole character, and whether it ends on one (bytes
    that are no UTF-8 at all read as U+FFFD)."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    text = decoder.decode(data)
    return text, not decoder.getstate()[0]


def _partial(piece: bytes) -> bool:
    try:
        piece.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


@dataclass(frozen=True)
class Suggestion:
    """A finished beam as the writer sees it.

    logprob/probability are pooled over beams that read the same (`suggestions_from`);
    text, token_ids and token_logprobs belong to the best of them. `exact` says whether
    `text` is exactly the decoded token ids (auto-stop may cut inside a token, and a beam
    that ends inside a character shows only its whole ones). A healed
    search's suggestion (`weave.search.healing`) is what follows the text typed after the
    story's last token boundary: its ids spell that typed text and then `text`, and
    replace the story's last `healed` ids (0: they follow the story's); its
    `token_pieces` are its tokens' texts less the typed text.
    """

    text: str
    token_ids: tuple[int, ...]
    logprob: float
    probability: float
    score: float
    token_pieces: tuple[str, ...]
    token_logprobs: tuple[float, ...]
    exact: bool
    healed: int = 0
    variants: tuple[str, ...] = ()  # texts shown as this one (`weave.search.rows`)

    def after(self, context: tuple[int, ...]) -> tuple[int, ...]:
        """The ids of the story searched from `context` once this suggestion is taken."""
        return context[: len(context) - self.healed] + self.token_ids

    def to_dict(self) -> dict:
        return {
            "text": self.text,
            "token_ids": list(self.token_ids),
            "logprob": self.logprob,
            "probability": self.probability,
            "score": self.score,
            "token_logprobs": list(self.token_logprobs),
        } | ({"variants": list(self.variants)} if self.variants else {})


def beam_score(node: TreeNode, score: Score) -> float:
    """The beam's score under `score` (`weave.search.scores`)."""
    return scores.beam_score([n.logprob for n in node.path()], node.text(), score)


def without_prefix_space(text: str) -> str:
    """LLooM's prefix-space rule: a suggestion is shown, and compared, without one leading
    space (accepting it puts the space back: `weave.desk.spot.accepted_text`)."""
    return text[1:] if text.startswith(" ") else text


def suggestions_from(
    leaves: list[TreeNode], score: Score, *, typed: str = "", healed: int = 0
) -> list[Suggestion]:
    """Pool finished beams that read the same under the prefix-space rule (" QQ" and "QQ"
    are one suggestion, as in LLooM v0.3) and rank them by score.

    A pooled suggestion's probability is its members' sum; its text and tokens are its
    best member's (by score), so accepting it appends what that beam spelled. After a
    healed search (`typed`, the text typed after the boundary; `healed`, the story ids
    given back) a suggestion is what a beam adds after `typed`; a beam that ended
    before spelling it all is none.
    """
    groups: dict[str, list[TreeNode]] = {}
    for leaf in leaves:
        text = leaf.text()
        if not text.startswith(typed):
            continue
        text = text[len(typed) :]
        if any(ch.isalnum() for ch in text):  # punctuation alone is no suggestion
            groups.setdefault(without_prefix_space(text), []).append(leaf)
    ranked = [_suggestion(members, score, typed, healed) for members in groups.values()]
    ranked.sort(key=lambda s: (-s.score, s.text))
    return ranked


def _suggestion(members: list[TreeNode], score: Score, typed: str, healed: int) -> Suggestion:
    best = max(members, key=lambda n: beam_score(n, score))
    path = best.path()
    joint = [sum(n.logprob for n in m.path()) for m in members]
    probability = sum(math.exp(lp) for lp in joint)
    logprob = math.log(probability) if probability > 0 else max(joint)
    return Suggestion(
        text=best.text()[len(typed) :],
        token_ids=tuple(n.token_id for n in path),
        logprob=logprob,
        probability=probability,
        score=logprob if score == "joint" else beam_score(best, score),
        token_pieces=_past(tuple(n.piece.decode("utf-8", errors="replace") for n in path), typed),
        token_logprobs=tuple(n.logprob for n in path),
        exact=best.cut is None and best.whole(),
        healed=healed,
    )


def _past(pieces: tuple[str, ...], typed: str) -> tuple[str, ...]:
    """Token texts less the typed text they begin with (one per token, "" for a token
    wholly typed)."""
    out, left = [], len(typed)
    for piece in pieces:
        out.append(piece[left:])
        left = max(0, left - len(piece))
    return tuple(out)
