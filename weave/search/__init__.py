"""The search, its tree and sampling: what a backend's next-token log-probs become.

`beams` is the threshold-splitting beam search (`SearchParams`, `expand`), pure: a
backend and parameters in, a token `tree` with ranked suggestions out; `ramify` draws N
samples. Nothing here reads the environment, stores or draws.
"""
