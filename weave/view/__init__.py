"""What the page is shown, without Streamlit: text, HTML and graphs made from values.

`present` shows model text (rows, words, tokens, shares), `messages` says the status
lines and messages about searches, draws and reading; `render` draws a
search's token tree and `story_graph` the loom as graphviz graphs, both folded by
`folding`; `loom_view` turns a loom into the story graph's nodes and picker labels.
"""
