"""Looms that travel: other loom tools' files read into LLooM, and Open Loom v2 written.

`detect.read_loom_file` finds a file's format and reads it; one module per format
(`openloom` for Open Loom v2, read and written; `openloom_v1`, `socketteer`, `loomsidian`,
`exoloom`, `miniloom`, `basemode`, `mikupad` read only) turns its file into a
`foreign.ForeignTree`, and `foreign.build` makes that a LLooM story, keeping what LLooM
cannot show. These are pure; `files` takes a file into the store (`weave.loom.store`
inserts what they read, checked) and writes a stored story out.
"""
