"""C++ kernels built on a thread while compilation goes on: results, shared builds, a failed build at the first call."""

import os
import subprocess
import sys
import warnings

import pytest
import torch
from ilite_helpers import check, compiled

from dynajit.inductor_lite import BuildError, cache_stats, compile_fx, compiled_graphs
from dynajit.inductor_lite._codegen_cpp import PRELUDE
from dynajit.inductor_lite._config import InductorConfig


def _fn(x, y):
    return ((x * 1.5 + y).relu().sum(-1), torch.softmax(x - y, -1))


def _inputs():
    torch.manual_seed(0)
    return torch.randn(6, 33), torch.randn(6, 33)


@pytest.mark.parametrize("background", [True, False])
def test_fresh_build_matches_eager(tmp_path, background):
    x, y = _inputs()
    check(_fn, x, y, options={"cache_dir": str(tmp_path), "background_build": background})


def test_forward_and_backward_build_at_once_and_match_eager(tmp_path):
    torch.manual_seed(0)
    w = torch.randn(17, 9, requires_grad=True)
    x = torch.randn(5, 17)

    def loss(x, w):
        return (torch.tanh(x @ w) * 2.5).sigmoid().sum()

    c = compile_fx(torch.fx.symbolic_trace(lambda x, w: (loss(x, w),)), [x, w], options={"cache_dir": str(tmp_path)})
    (got,) = c(x, w)
    got.backward()
    grad, w.grad = w.grad, None
    loss(x, w).backward()
    torch.testing.assert_close(got, loss(x, w))
    torch.testing.assert_close(grad, w.grad)
    assert len(compiled_graphs(c)) == 2


def test_same_source_while_building_is_built_once(tmp_path):
    x, y = _inputs()
    before = cache_stats()
    first = compiled(_fn, x, y, options={"cache_dir": str(tmp_path)})
    second = compiled(_fn, x, y, options={"cache_dir": str(tmp_path)})
    after = cache_stats()
    assert after["builds"] - before["builds"] == 1
    for c in (first, second):
        for got, want in zip(c(x, y), _fn(x, y)):
            torch.testing.assert_close(got, want)


def test_a_failed_build_runs_the_graph_through_aten_from_its_first_call(tmp_path):
    # The caller already holds the compiled graph, so it cannot fall back to eager itself: the graph does.
    # That fallback is what strict mode (on for the whole suite) forbids, so this test turns it off.
    x, y = _inputs()
    options = {"cache_dir": str(tmp_path), "cxx_flags": "-O2 -fno-such-flag-anywhere", "strict": False}
    c = compiled(_fn, x, y, options=options)
    expected = _fn(x, y)
    with pytest.warns(RuntimeWarning, match="(?s)no-such-flag.*runs its aten ops eagerly"):
        first = c(x, y)
    for out in (first, c(x, y)):
        for a, e in zip(out, expected):
            torch.testing.assert_close(a, e)
    (graph,) = compiled_graphs(c)
    assert any("no-such-flag" in reason for reason in graph.info["fallbacks"])


def test_a_failed_build_raises_at_every_call_in_strict_mode(tmp_path):
    x, y = _inputs()
    options = {"cache_dir": str(tmp_path), "cxx_flags": "-O2 -fno-such-flag-anywhere", "strict": True}
    c = compiled(_fn, x, y, options=options)
    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no warning and no aten run: the error itself
            with pytest.raises(BuildError, match=r"(?s)no-such-flag.*strict mode"):
                c(x, y)
    (graph,) = compiled_graphs(c)
    assert not graph.info["fallbacks"]


def test_strict_mode_reads_the_same_environment_variable_as_capture(monkeypatch):
    monkeypatch.setenv("DYNAJIT_STRICT", "1")
    assert InductorConfig().strict
    monkeypatch.setenv("DYNAJIT_STRICT", "0")
    assert not InductorConfig().strict


def test_build_error_is_raised_by_compile_without_background_build(tmp_path):
    x, y = _inputs()
    options = {"cache_dir": str(tmp_path), "cxx_flags": "-O2 -fno-such-flag-anywhere", "background_build": False}
    with pytest.raises(BuildError, match="no-such-flag"):
        compiled(_fn, x, y, options=options)


def _many_kernels(x, y):
    # Reductions over different dimensions cannot fuse: one kernel each.
    a = torch.softmax(x, -1)
    b = torch.softmax(x, 0)
    c = (a * y).sum(0)
    d = (b + y).amax(-1)
    return a + b, c, d, torch.log_softmax(y, 0)


@pytest.mark.parametrize("parts", [0, 2, 3])
def test_kernels_split_into_parallel_libraries_match_eager(tmp_path, parts):
    x, y = _inputs()
    c = check(_many_kernels, x, y, options={"cache_dir": str(tmp_path), "build_parts": parts})
    (graph,) = compiled_graphs(c)
    libraries = list(tmp_path.glob("*/*.so"))
    assert graph.info["kernels"] >= 3
    if parts:
        assert len(libraries) == parts
    assert graph.kernel_source.count(PRELUDE) == 1  # the source shown is one, however it was built


_FORK_SCRIPT = """
import os, sys
import torch
sys.path.insert(0, {tests!r})
from test_background_build import _inputs, _many_kernels, compiled
x, y = _inputs()
c = compiled(_many_kernels, x, y, options={{"cache_dir": {cache!r}, "build_parts": 2}})
pid = os.fork()  # right after compiling: the builds are still running
if pid == 0:
    status = 1
    try:
        got = c(x, y)
        status = 0 if all(torch.allclose(a, e) for a, e in zip(got, _many_kernels(x, y))) else 2
    finally:
        os._exit(status)
_, status = os.waitpid(pid, 0)
print("child exit", os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_process_forked_while_building_runs_the_graph(tmp_path):
    # In a fresh process: a child forked after OpenMP ran kernels in this one could hang in libgomp.
    script = _FORK_SCRIPT.format(tests=os.path.dirname(__file__), cache=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.split()[-2:] == ["exit", "0"]
