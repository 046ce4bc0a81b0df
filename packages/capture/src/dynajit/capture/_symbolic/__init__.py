"""The symbolic bytecode interpreter: instructions, variable trackers, tracer, code generation and resume functions."""
