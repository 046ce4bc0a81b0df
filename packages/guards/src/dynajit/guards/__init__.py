"""dynajit's guards: sources, guard kinds, and guard sets compiled into fast check functions."""

__all__: list[str] = []
