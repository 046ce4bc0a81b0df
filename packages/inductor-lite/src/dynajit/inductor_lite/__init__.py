"""dynajit's default backend: lowering, fusion, and C++/OpenMP and Triton code generation."""

__all__: list[str] = []
