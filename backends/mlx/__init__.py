"""The MLX backend: an mlx-lm model in this process, as a package.

`backend.MLXBackend` is the adapter the registry builds (`backends.create_backend`); the
rest serve it alone: the worker thread (`worker`), its request batching (`batching`), the
forwards over the KV fragment tree (`forward`, `kv_tree`, with the disk: `kv_disk`,
`kv_keep`), ramify's samples (`sampling`), token bytes (`tokens`), CPU attention, SwiGLU,
the head and each row's ranking on numpy (`attention`, `swiglu`, `head`, `ranking`,
`numpy_views`, routed into mlx-lm by `cpu_routes`), finding and loading a model
(`loading`, `weights`, `catalog`), the alternatives at a text's tokens (`alternatives`)
and OpenBLAS (`openblas`).

OpenBLAS must be in the process before mlx is imported, and this package's modules import
mlx at their top: so the package's first import loads it (`openblas.preload`), before
any of them. Nothing outside the MLX backend's construction (`backends.create_backend`)
and the page's model catalog on MLX imports this package: importing `weave`, `lloom` or
`backends` loads neither OpenBLAS nor mlx, and a page on a remote backend never does.
"""

from backends.mlx.openblas import preload

preload()
