"""dynajit's capture: call interception, the symbolic bytecode interpreter, graph breaks and the code cache."""

__all__: list[str] = []
