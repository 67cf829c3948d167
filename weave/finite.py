"""Checking that data read back (a saved or imported search) holds only finite numbers.

NaN and infinities are not JSON, and a page cannot draw them (a progress bar of NaN
raises). The backends let none through, but a search saved before they checked, or a
file someone edited, may hold them: `non_finite` finds the first, so the caller can
ignore that data with a message instead of failing on it every time it is opened.
"""

from __future__ import annotations

import math
from typing import Any


def non_finite(value: Any, where: str = "") -> str | None:
    """Where in `value` (nested dicts and lists) the first NaN or infinity is, as a path
    such as `tree.children[0].logprob`; None when every number is finite."""
    if isinstance(value, float) and not math.isfinite(value):
        return where or "the value"
    if isinstance(value, dict):
        items = ((f"{where}.{key}" if where else str(key), item) for key, item in value.items())
    elif isinstance(value, list | tuple):
        items = ((f"{where}[{i}]", item) for i, item in enumerate(value))
    else:
        return None
    return next((found for path, item in items if (found := non_finite(item, path))), None)
