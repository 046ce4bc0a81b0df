"""The Python entry point of each generated C++ kernel: ``DJ_PY(name)``, a METH_FASTCALL function.

The wrapper calls a kernel through it with the interpreter's own calling convention, pointers and sizes as ints:
0.14 us a call, where ctypes' argument conversion cost 0.67.
"""

from __future__ import annotations

from collections.abc import Sequence

from dynajit.inductor_lite._ir import IndexFault

__all__ = ["python_entry"]


def python_entry(name: str, pointer_types: Sequence[str], sizes: int, faults: Sequence[IndexFault] = ()) -> str:
    """``DJ_PY(name)``: a METH_FASTCALL function calling kernel ``name`` with its pointers and sizes, passed as ints.

    The GIL is released while the kernel runs, as ctypes released it. A call with another number of arguments,
    or an argument that is not an int, raises TypeError before the kernel runs; a pointer of 0 is an empty
    tensor's, and valid. A kernel with indirect loads reports the first index it found out of range: the
    entry raises eager's error for it (``faults``, by site).
    """
    reads = [f"  auto a{i} = ({t})PyLong_AsVoidPtr(args[{i}]);" for i, t in enumerate(pointer_types)]
    n = len(pointer_types)
    reads += [f"  const int64_t a{n + j} = PyLong_AsLongLong(args[{n + j}]);" for j in range(sizes)]
    arguments = ", ".join([*(f"a{i}" for i in range(n + sizes)), *(["&fault"] if faults else [])])
    raises = [
        f'  if (fault.site == {site}) {{ PyErr_Format(PyExc_{f.exception}, "{f.message}", '
        "(long long)fault.value, (long long)fault.size); return nullptr; }"
        for site, f in enumerate(faults, 1)
    ]
    return "\n".join(
        [
            "",
            f'extern "C" PyObject* DJ_PY({name})(PyObject* self, PyObject* const* args, intptr_t nargs) {{',
            f"  if (nargs != {n + sizes}) {{",
            f'    PyErr_SetString(PyExc_TypeError, "{name} takes {n + sizes} arguments");',
            "    return nullptr;",
            "  }",
            *reads,
            "  if (PyErr_Occurred()) return nullptr;",
            *(["  dj_fault_t fault = {0, 0, 0};"] if faults else []),
            "  void* released = PyEval_SaveThread();",
            f"  {name}({arguments});",
            "  PyEval_RestoreThread(released);",
            *raises,
            "  return dj_py_none();",
            "}",
            "",
        ]
    )
