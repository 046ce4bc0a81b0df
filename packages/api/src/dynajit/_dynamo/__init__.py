"""dynajit._dynamo: the private names kept working; most are deprecated aliases of ``dynajit.compiler``."""

from dynajit.compiler._registry import list_backends, lookup_backend, register_backend

__all__ = ["list_backends", "lookup_backend", "register_backend"]
