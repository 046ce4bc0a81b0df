/* dynajit guards' tensor facts: a tensor's dtype, device, requires_grad, sizes, strides and storage offset, read
 * from its TensorImpl for the guard machine (``_vm.c``).
 *
 * Read through Python, each fact is an attribute lookup or a method call through torch's argument parser (a
 * module's parameter cost about 0.8 us to guard); read here, a few nanoseconds. Each answer is the one the
 * Python check gives, or -1 when this reader cannot be sure of it: the machine then runs the Python check.
 * That is so for anything but an exact ``torch.Tensor`` or ``torch.nn.Parameter`` (a subclass may override
 * a property or ``__torch_function__``), under a torch function mode (the getters would call it), for a layout
 * other than strided (Python raises reading a sparse tensor's strides, where its TensorImpl answers), and
 * where reading throws. An instance attribute named ``stride`` does not hide the strides here, as it does from
 * ``t.stride()``: the graph was traced with the real ones.
 */
#include <Python.h>

#include <ATen/PythonTorchFunctionTLS.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/autograd/python_variable.h>

namespace {

enum Fact { DTYPE_IS = 1, IS_CPU = 2, REQUIRES_GRAD_IS = 3, SIZES_EQ = 4, STRIDES_EQ = 5, OFFSET_EQ = 6 };

// Whether Python's getters would read ``value``'s own TensorImpl, with no torch function in between (torch's
// own test: an exact Tensor or Parameter, and no torch function mode).
bool plain(PyObject* value) {
  return THPVariable_CheckExact(value) && !at::impl::torch_function_mode_enabled();
}

// ``expected`` (an int) equals ``have``: 1 or 0, -1 when ``expected`` is anything else.
int int_equal(PyObject* expected, int64_t have) {
  if (!PyLong_CheckExact(expected)) return -1;
  int overflow = 0;
  long long want = PyLong_AsLongLongAndOverflow(expected, &overflow);
  if (overflow == 0 && want == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return -1;
  }
  return overflow == 0 && want == have;  // (no size, stride or offset is outside int64)
}

// ``dims`` equals ``expected``, a tuple of ints; -1 when ``expected`` is anything else.
int dims_equal(c10::IntArrayRef dims, PyObject* expected) {
  if (!PyTuple_CheckExact(expected)) return -1;
  Py_ssize_t n = PyTuple_GET_SIZE(expected);
  int same = n == (Py_ssize_t)dims.size();
  for (Py_ssize_t i = 0; i < n; i++) {
    int equal = int_equal(PyTuple_GET_ITEM(expected, i), i < (Py_ssize_t)dims.size() ? dims[i] : 0);
    if (equal < 0) return -1;
    same = same && equal;
  }
  return same;
}

int read_fact(PyObject* value, int fact, PyObject* expected) noexcept {
  if (!plain(value)) return -1;
  try {
    const at::Tensor& tensor = THPVariable_Unpack(value);
    if (tensor.layout() != at::kStrided) return -1;  // (a sparse tensor has no strides Python can read)
    switch (fact) {
      case DTYPE_IS:
        if (!THPDtype_Check(expected)) return -1;
        return ((THPDtype*)expected)->scalar_type == tensor.scalar_type();
      case IS_CPU:
        return tensor.is_cpu();
      case REQUIRES_GRAD_IS:
        if (expected != Py_True && expected != Py_False) return -1;
        return tensor.requires_grad() == (expected == Py_True);
      case SIZES_EQ:
        return dims_equal(tensor.sizes(), expected);
      case STRIDES_EQ:
        return dims_equal(tensor.strides(), expected);
      case OFFSET_EQ:
        return int_equal(expected, tensor.storage_offset());
      default:
        return -1;
    }
  } catch (...) {  // (symbolic or custom sizes: Python raises, or answers, the same)
    return -1;
  }
}

// read(value, fact: int, expected) -> 1, 0, or -1 (Python must answer): the machine's answer, for tests.
PyObject* read(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3 || !PyLong_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "read(value, fact: int, expected)");
    return nullptr;
  }
  return PyLong_FromLong(read_fact(args[0], (int)PyLong_AsLong(args[1]), args[2]));
}

PyMethodDef methods[] = {
    {"read", (PyCFunction)(void (*)(void))read, METH_FASTCALL, "A fact of a tensor: 1, 0, or -1 for unknown."},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "dynajit_tensor_facts", nullptr, -1, methods};

}  // namespace

typedef int (*dj_tensor_fact_reader)(PyObject*, int, PyObject*);

PyMODINIT_FUNC PyInit_dynajit_tensor_facts(void) {
  PyObject* module = PyModule_Create(&module_def);
  if (module == nullptr) return nullptr;
  PyObject* capsule = PyCapsule_New((void*)(dj_tensor_fact_reader)read_fact, "dynajit_tensor_facts.reader", nullptr);
  if (capsule == nullptr || PyModule_AddObject(module, "reader", capsule) < 0) {
    Py_XDECREF(capsule);
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
