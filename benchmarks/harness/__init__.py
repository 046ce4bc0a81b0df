"""The benchmark harness: workloads, the implementations compared, interleaved timing, and the reports.

``benchmarks/run.py`` drives it from the command line; ``benchmarks/demo.py``
reuses its transformer block and its counting backend.
"""
