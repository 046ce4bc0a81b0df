"""The disk cache of built kernels: atomic entries, corrupt entries rebuilt, reuse across processes."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from dynajit.inductor_lite import cache_stats, compile_fx, forget_loaded_libraries


def _fn(x):
    return ((x * 1.25).sigmoid() + 3.5,)


def _compile(cache_dir):
    x = torch.randn(3, 11)
    compiled = compile_fx(torch.fx.symbolic_trace(_fn), [x], options={"cache_dir": str(cache_dir)})
    torch.testing.assert_close(compiled(x)[0], _fn(x)[0])


def test_entry_is_written_with_checksum(tmp_path):
    _compile(tmp_path)
    libs = list(tmp_path.glob("*/*.so"))
    assert len(libs) == 1
    assert libs[0].with_suffix(".json").exists()
    assert not list(tmp_path.glob("*/.*"))  # no temporary leftovers


def test_corrupt_entry_is_rebuilt(tmp_path):
    _compile(tmp_path)
    (lib,) = tmp_path.glob("*/*.so")
    # Truncated (written beside and moved over, so this process's mapped copy of the library stays intact).
    damaged = lib.with_suffix(".damaged")
    damaged.write_bytes(lib.read_bytes()[:100])
    os.replace(damaged, lib)
    forget_loaded_libraries()
    before = cache_stats()
    _compile(tmp_path)
    after = cache_stats()
    assert after["rebuilt_corrupt"] == before["rebuilt_corrupt"] + 1
    assert after["builds"] == before["builds"] + 1
    assert lib.stat().st_size > 100


def test_missing_checksum_is_rebuilt(tmp_path):
    _compile(tmp_path)
    (meta,) = tmp_path.glob("*/*.json")
    meta.write_text("{not json")
    forget_loaded_libraries()
    before = cache_stats()
    _compile(tmp_path)
    assert cache_stats()["rebuilt_corrupt"] == before["rebuilt_corrupt"] + 1


def test_second_process_hits_the_cache(tmp_path):
    _compile(tmp_path)
    script = textwrap.dedent(
        f"""
        import torch
        from dynajit.inductor_lite import cache_stats, compile_fx
        def _fn(x):
            return ((x * 1.25).sigmoid() + 3.5,)
        x = torch.randn(3, 11)
        c = compile_fx(torch.fx.symbolic_trace(_fn), [x], options={{"cache_dir": {str(tmp_path)!r}}})
        torch.testing.assert_close(c(x)[0], _fn(x)[0])
        s = cache_stats()
        print(s["disk_hits"], s["builds"])
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split()
    assert out[-2:] == ["1", "0"]


def test_two_builds_of_one_kernel_at_once_share_no_temporary_file(tmp_path, monkeypatch):
    """Processes (test workers, data-loader workers) may build the same kernel into one cache at once: each
    build's files move into the cache from a directory of its own. Both builds here reach their first move
    together (a barrier), so a temporary name shared between them would make one fail."""
    import threading

    from dynajit.inductor_lite import _build

    barrier, first_move = threading.Barrier(2, timeout=60), threading.local()
    replace = os.replace

    def meeting_replace(src, dst):
        if not getattr(first_move, "done", False):
            first_move.done = True
            barrier.wait()
        return replace(src, dst)

    monkeypatch.setattr(_build.os, "replace", meeting_replace)
    folder, key = tmp_path / "ab", "ab" + "0" * 38
    folder.mkdir()
    source = 'extern "C" int answer() { return 42; }\n'
    args = (source, "g++", "-O1", folder, key, folder / f"{key}.so", folder / f"{key}.json")
    errors = []

    def build():
        try:
            _build._build(*args)
        except Exception as err:
            errors.append(err)

    threads = [threading.Thread(target=build) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert (folder / f"{key}.cpp").read_text() == source
    assert not list(folder.glob(".*"))  # no temporary leftovers


def test_a_kernel_is_a_python_function_taking_ints_and_refusing_other_arguments(tmp_path):
    # Kernels are called through their METH_FASTCALL entry points (ctypes cost four times as much per call).
    from dynajit.inductor_lite._build import load_library, python_function
    from dynajit.inductor_lite._codegen_cpp import PRELUDE, math_declarations
    from dynajit.inductor_lite._cpp_entry import python_entry

    kernel = 'extern "C" void add_rows(const float* p0, float* p1, const int64_t n) { for (int64_t i = 0; i < n; i++) p1[i] = p0[i] + 1; }'
    source = "\n".join(
        [math_declarations(False), PRELUDE, kernel, python_entry("add_rows", ["const float*", "float*"], 1)]
    )
    library, _ = load_library(source, "g++", "-O1", str(tmp_path))
    add_rows = python_function(library, "add_rows")
    x, out = torch.arange(5.0), torch.zeros(5)
    assert add_rows(x.data_ptr(), out.data_ptr(), 3) is None and add_rows.__name__ == "add_rows"
    assert out.tolist() == [1.0, 2.0, 3.0, 0.0, 0.0]
    with pytest.raises(TypeError):
        add_rows(x.data_ptr(), out.data_ptr(), 2.5)  # a float size is refused before the kernel runs
    assert out.tolist() == [1.0, 2.0, 3.0, 0.0, 0.0]
    with pytest.raises(TypeError, match="takes 3 arguments"):
        add_rows(x.data_ptr(), out.data_ptr())  # one argument short: refused, never read past the end
