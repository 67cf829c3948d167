"""A search as JSON: the one codec of a search, for the store and the command line.

`search_to_dict` writes a search (its parameters and the steering it was made under,
when given, its stats, ranked suggestions and whole tree); `search_from_dict` reads one
back as a `SavedSearch`, or None where it cannot be shown (NaN or an infinity in it:
`unshowable` says why); `search_steering` reads the steering recorded with it. A tab
saves its searches beside their nodes this way (`weave.desk.offers`), and
`python -m weave expand --json` prints one. Pure: no files, no store.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields

from weave.finite import non_finite
from weave.search.beams import SearchResult, SearchStats
from weave.search.params import SearchParams
from weave.search.tree import Suggestion, TreeNode
from weave.search.worth import worth
from weave.story.steering import Steering


def search_to_dict(
    result: SearchResult, params: SearchParams | None = None, steering: Steering | None = None
) -> dict:
    """A search as JSON: parameters and steering (when given), stats (what it cost, and
    what its suggestions are worth: `weave.search.worth`), the ranked suggestions and the
    whole tree; a healed search's typed text (`weave.search.healing`), which its
    suggestions follow and its tree's first tokens spell."""
    data = {} if params is None else {"params": asdict(params)}
    data |= {} if steering is None else {"steering": steering.to_dict()}
    value = worth([s.probability for s in result.suggestions])
    data |= {
        "stats": result.stats.to_dict() | value.to_dict(),
        "suggestions": [asdict(s) for s in result.suggestions],
        "tree": result.tree.to_dict(),
        "context_tokens": len(result.context_ids),
    }
    return data | ({"typed": result.typed} if result.typed else {})


@dataclass(frozen=True)
class SavedSearch:
    """A search read back: what it found, and the parameters it was made with."""

    result: SearchResult
    params: SearchParams


def search_from_dict(data: dict) -> SavedSearch | None:
    """`search_to_dict`'s inverse; None when the data is not a search we can show
    (one holding NaN or an infinity, say)."""
    if non_finite(data):
        return None
    try:
        params = SearchParams(**_known(SearchParams, data["params"]))
        suggestions = [_suggestion(s) for s in data["suggestions"]]
        stats = SearchStats(**_known(SearchStats, data["stats"]))
        tree = TreeNode.from_dict(data["tree"])
        typed = data.get("typed", "")
        if not isinstance(typed, str):
            raise TypeError("typed")
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    return SavedSearch(SearchResult(suggestions, tree, stats, context_ids=(), typed=typed), params)


def search_steering(data: dict) -> Steering | None:
    """The steering a saved search was made under (none recorded: no steering); None when
    what is recorded is not steering we can read."""
    try:
        return Steering.from_dict(data.get("steering", {}))
    except ValueError:
        return None


def unshowable(search: object, what: str, where: str = "search") -> str | None:
    """Why a saved or imported search is not shown, when it holds NaN or an infinity."""
    broken = non_finite(search, where)
    if broken is None:
        return None
    return f"{what} are not shown: {broken} is not a finite number. The story is searched again."


def unshowable_import(data: bytes | str) -> str | None:
    """Why an imported file's suggestions were left out (the store keeps none holding NaN
    or an infinity): the loom's per node, or an older file's one search."""
    doc = json.loads(data)  # the store has read it: it is a JSON object
    searches = {key: doc[key] for key in ("suggestions", "search", "tree") if key in doc}
    return unshowable(searches, "The file's suggestions", "")


def _suggestion(data: dict) -> Suggestion:
    values = _known(Suggestion, data)
    for name in ("token_ids", "token_pieces", "token_logprobs", "variants"):
        if name in values:
            values[name] = tuple(values[name])
    return Suggestion(**values)


def _known(cls, data: dict) -> dict:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}
