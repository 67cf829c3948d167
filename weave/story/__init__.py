"""What the model reads: a story's steering, its context, and its token ids.

`steering` holds the memory, the author's note and the lorebook as values (`lorebook`
reads lorebook files, `steering_cli` the command line's options); `context` builds the
ids a backend receives and cuts them to the window; `model_context` fits a story's
context to the model; `token_ids` gives a loom node's ids the same every time.
Nothing here searches or draws.
"""
