"""The MLX backend: an mlx-lm model in this process, as a package.

`backend.MLXBackend` is the adapter the registry builds (`backends.create_backend`); the
rest serve it alone: the worker's request batching (`batching`), the KV fragment tree
(`kv_tree`), CPU attention, SwiGLU, the head and each row's ranking on numpy
(`attention`, `swiglu`, `head`, `ranking`, `numpy_views`, routed into mlx-lm by
`cpu_routes`), finding and loading a model (`loading`, `weights`, `catalog`), the
alternatives at a text's tokens (`alternatives`) and OpenBLAS (`openblas`).
"""
