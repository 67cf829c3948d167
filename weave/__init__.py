"""LLooM's engine, free of any UI: search, token tree, rendering, settings, story store.

`python -m weave` is its command line; `lloom.py` is the page built on it.
"""
