"""The page's modules: what `lloom.py` (the Streamlit entry, at the top level) lays out.

Each module draws one part of the page and calls the engine (`weave`); the session's state
is `page.state`'s, the CSS and scripts are files in page/static/. No algorithm lives here.
"""
