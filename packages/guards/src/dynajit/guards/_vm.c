/* dynajit guards' check machine: runs a compiled guard set's program without the bytecode interpreter.
 *
 * A program is a flat array of instructions over registers. Loads put a new reference in a register (an
 * argument, an attribute, an item, a cell's contents, a method's or a function's result without arguments, or
 * what a Python function computes from a register);
 * checks compare registers with constants, or call a Python function with registers and test its truth.
 * Any exception derived from Exception makes the check answer False, as the generated Python function's
 * ``try`` does; others (KeyboardInterrupt) propagate.
 *
 * A tensor's fact (dtype, sizes, ...) is asked of the tensor facts reader (``_tensor_facts.cpp``) when the
 * machine was given one: its answer replaces the Python check that follows, which runs when it has none.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>

enum {
    OP_ARG = 0,       /* reg[dst] = args[a] */
    OP_ATTR = 1,      /* reg[dst] = getattr(reg[a], const[b]) */
    OP_ITEM = 2,      /* reg[dst] = reg[a][const[b]] */
    OP_CELL = 3,      /* reg[dst] = const[a].cell_contents */
    OP_PYLOAD = 4,    /* reg[dst] = const[a](reg[b]), or const[a]() for b < 0 */
    OP_IS = 5,        /* reg[a] is const[b] */
    OP_TYPE_IS = 6,   /* type(reg[a]) is const[b] */
    OP_WEAK_IS = 7,   /* const[b]() is reg[a] is not None */
    OP_PYCHECK = 8,   /* const[a](*[reg[i] for i in const[b]]) is true */
    OP_IS_NOT = 9,    /* reg[a] is not const[b] */
    OP_SAME = 10,     /* reg[a] is reg[b] */
    OP_FALSY = 11,    /* not reg[a] */
    OP_CONTAINS = 12, /* const[b] in reg[a] */
    OP_LACKS = 13,    /* not (const[b] in reg[a]) */
    OP_EQ = 14,       /* reg[a] == const[b] */
    OP_LEN_EQ = 15,   /* len(reg[a]) == const[b] */
    OP_METHOD = 16,   /* reg[dst] = reg[a].const[b]() */
    OP_TRUTHY = 17,   /* reg[a] is true */
    OP_TENSOR_FACT = 18, /* fact dst >> 8 of reg[a] against const[b]; known, it skips the dst & 0xff that follow */
    OP_HAS_ATTR = 19,   /* hasattr(reg[a], const[b]) */
    OP_LACKS_ATTR = 20, /* not hasattr(reg[a], const[b]) */
};

typedef int (*fact_reader)(PyObject *value, int fact, PyObject *expected); /* 1, 0, or -1: not known */

typedef struct {
    int op, dst, a, b;
} Instr;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    Py_ssize_t n_instr, n_regs, n_args;
    Instr *code;
    PyObject *consts; /* tuple */
    PyObject *reader_capsule;
    fact_reader read_fact; /* NULL: the Python checks answer */
} Machine;

static PyTypeObject MachineType;

#define MAX_PY_ARGS 64

/* What getattr does for an instance of a class that keeps object's attribute lookup (and maybe adds a
 * ``__getattr__``, as nn.Module does): set at import. */
static getattrofunc hook_getattro;           /* a class with a __getattr__ gets this slot */
static PyObject *getattribute_name = NULL;   /* "__getattribute__" */
static PyObject *object_getattribute = NULL; /* object.__getattribute__, as classes find it */

/* getattr(obj, name), reading the instance's dict directly where getattr would: the class keeps object's
 * lookup and has no attribute of that name (no descriptor could come first). */
static PyObject *get_attribute(PyObject *obj, PyObject *name) {
    PyTypeObject *type = Py_TYPE(obj);
    int generic = type->tp_getattro == PyObject_GenericGetAttr ||
                  (type->tp_getattro == hook_getattro &&
                   _PyType_Lookup(type, getattribute_name) == object_getattribute);
    if (generic && PyUnicode_CheckExact(name) && _PyType_Lookup(type, name) == NULL) {
        PyObject **dict = _PyObject_GetDictPtr(obj);
        if (dict != NULL && *dict != NULL) {
            PyObject *value = PyDict_GetItemWithError(*dict, name);
            if (value != NULL) return Py_NewRef(value);
            if (PyErr_Occurred()) return NULL;
        }
    }
    return PyObject_GetAttr(obj, name);
}

/* hasattr(obj, name): 1 or 0, -1 with an exception set. A class (of a metaclass keeping type's lookup) lacks a
 * name neither it nor its metaclass defines without getattr building the AttributeError (3.11's type lookup
 * always builds it; formatting its message cost more than the rest of a check). */
static int has_attribute(PyObject *obj, PyObject *name) {
    if (PyType_Check(obj) && Py_TYPE(obj)->tp_getattro == PyType_Type.tp_getattro && PyUnicode_CheckExact(name) &&
        _PyType_Lookup(Py_TYPE(obj), name) == NULL && _PyType_Lookup((PyTypeObject *)obj, name) == NULL) {
        return 0;
    }
    PyObject *value = NULL;
#if PY_VERSION_HEX >= 0x030D0000
    int found = PyObject_GetOptionalAttr(obj, name, &value);
#else
    int found = _PyObject_LookupAttr(obj, name, &value);
#endif
    Py_XDECREF(value);
    return found;
}

/* 0: an exception derived from Exception was cleared (the check fails); -1: another one is pending. */
static int swallow(void) {
    if (PyErr_ExceptionMatches(PyExc_Exception)) {
        PyErr_Clear();
        return 0;
    }
    return -1;
}

static PyObject *machine_call(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Machine *m = (Machine *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != m->n_args || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0)) {
        PyErr_Format(PyExc_TypeError, "guard check takes %zd positional arguments, got %zd", m->n_args, nargs);
        return NULL;
    }
    if (m->consts == NULL) return Py_NewRef(Py_False); /* (cleared by the collector: nothing is known to hold) */
    PyObject *stack_regs[256];
    PyObject **regs = stack_regs;
    if (m->n_regs > 256) {
        regs = PyMem_Calloc((size_t)m->n_regs, sizeof(PyObject *));
        if (regs == NULL) return PyErr_NoMemory();
    } else {
        memset(regs, 0, sizeof(PyObject *) * (size_t)m->n_regs);
    }
    PyObject *consts = m->consts;
    int result = 1; /* 1 pass, 0 fail, -1 error */
    for (Py_ssize_t pc = 0; pc < m->n_instr && result == 1; pc++) {
        const Instr *in = &m->code[pc];
        PyObject *value = NULL;
        switch (in->op) {
        case OP_ARG:
            value = Py_NewRef(args[in->a]);
            break;
        case OP_ATTR:
            value = get_attribute(regs[in->a], PyTuple_GET_ITEM(consts, in->b));
            break;
        case OP_ITEM: {
            PyObject *container = regs[in->a], *key = PyTuple_GET_ITEM(consts, in->b);
            if (PyDict_CheckExact(container)) {
                value = PyDict_GetItemWithError(container, key);
                if (value != NULL) {
                    Py_INCREF(value);
                } else if (!PyErr_Occurred()) {
                    PyErr_SetObject(PyExc_KeyError, key);
                }
            } else {
                value = PyObject_GetItem(container, key);
            }
            break;
        }
        case OP_CELL:
            if (!PyCell_Check(PyTuple_GET_ITEM(consts, in->a))) {
                PyErr_SetString(PyExc_TypeError, "guard machine: a closure source's constant is not a cell");
                break;
            }
            value = PyCell_GET(PyTuple_GET_ITEM(consts, in->a));
            if (value == NULL) {
                PyErr_SetString(PyExc_ValueError, "Cell is empty");
            } else {
                Py_INCREF(value);
            }
            break;
        case OP_PYLOAD:
            value = in->b < 0 ? PyObject_CallNoArgs(PyTuple_GET_ITEM(consts, in->a))
                              : PyObject_CallOneArg(PyTuple_GET_ITEM(consts, in->a), regs[in->b]);
            break;
        case OP_METHOD:
            value = PyObject_CallMethodNoArgs(regs[in->a], PyTuple_GET_ITEM(consts, in->b));
            break;
        case OP_IS:
            result = regs[in->a] == PyTuple_GET_ITEM(consts, in->b);
            continue;
        case OP_TENSOR_FACT: {
            int known = m->read_fact == NULL ? -1
                                             : m->read_fact(regs[in->a], in->dst >> 8, PyTuple_GET_ITEM(consts, in->b));
            if (known >= 0) {
                result = known;
                pc += in->dst & 0xff;
            }
            continue;
        }
        case OP_HAS_ATTR:
        case OP_LACKS_ATTR: {
            int found = has_attribute(regs[in->a], PyTuple_GET_ITEM(consts, in->b));
            result = found < 0 ? swallow() : (found == (in->op == OP_HAS_ATTR));
            continue;
        }
        case OP_TRUTHY: {
            int truth = PyObject_IsTrue(regs[in->a]);
            result = truth < 0 ? swallow() : truth;
            continue;
        }
        case OP_SAME:
            result = regs[in->a] == regs[in->b];
            continue;
        case OP_FALSY: {
            int truth = PyObject_IsTrue(regs[in->a]);
            result = truth < 0 ? swallow() : !truth;
            continue;
        }
        case OP_CONTAINS:
        case OP_LACKS: {
            int found = PySequence_Contains(regs[in->a], PyTuple_GET_ITEM(consts, in->b));
            result = found < 0 ? swallow() : (found == (in->op == OP_CONTAINS));
            continue;
        }
        case OP_EQ: {
            PyObject *out = PyObject_RichCompare(regs[in->a], PyTuple_GET_ITEM(consts, in->b), Py_EQ);
            int truth = out == NULL ? -1 : PyObject_IsTrue(out);
            Py_XDECREF(out);
            result = truth < 0 ? swallow() : truth;
            continue;
        }
        case OP_LEN_EQ: {
            Py_ssize_t length = PyObject_Length(regs[in->a]);
            result = length < 0 ? swallow() : length == PyLong_AsSsize_t(PyTuple_GET_ITEM(consts, in->b));
            continue;
        }
        case OP_IS_NOT:
            result = regs[in->a] != PyTuple_GET_ITEM(consts, in->b);
            continue;
        case OP_TYPE_IS:
            result = (PyObject *)Py_TYPE(regs[in->a]) == PyTuple_GET_ITEM(consts, in->b);
            continue;
        case OP_WEAK_IS: {
#if PY_VERSION_HEX >= 0x030D0000
            PyObject *referent = NULL;
            if (PyWeakref_GetRef(PyTuple_GET_ITEM(consts, in->b), &referent) < 0) {
                result = swallow();
                continue;
            }
            result = referent != NULL && referent == regs[in->a] && referent != Py_None;
            Py_XDECREF(referent);
#else
            PyObject *referent = PyWeakref_GetObject(PyTuple_GET_ITEM(consts, in->b)); /* borrowed */
            if (referent == NULL) {
                result = swallow();
                continue;
            }
            result = referent == regs[in->a] && referent != Py_None;
#endif
            continue;
        }
        case OP_PYCHECK: {
            PyObject *fn = PyTuple_GET_ITEM(consts, in->a), *which = PyTuple_GET_ITEM(consts, in->b);
            Py_ssize_t n = PyTuple_GET_SIZE(which);
            PyObject *small[MAX_PY_ARGS];
            PyObject **argv = n <= MAX_PY_ARGS ? small : PyMem_Malloc(sizeof(PyObject *) * (size_t)n);
            if (argv == NULL) {
                PyErr_NoMemory();
                result = -1;
                continue;
            }
            for (Py_ssize_t i = 0; i < n; i++) argv[i] = regs[PyLong_AsSsize_t(PyTuple_GET_ITEM(which, i))];
            PyObject *out = PyObject_Vectorcall(fn, argv, (size_t)n, NULL);
            if (argv != small) PyMem_Free(argv);
            if (out == NULL) {
                result = swallow();
                continue;
            }
            int truth = PyObject_IsTrue(out);
            Py_DECREF(out);
            result = truth < 0 ? swallow() : truth;
            continue;
        }
        default:
            PyErr_SetString(PyExc_SystemError, "guard machine: unknown instruction");
            result = -1;
            continue;
        }
        if (value == NULL) {
            result = swallow();
            continue;
        }
        PyObject *old = regs[in->dst];
        regs[in->dst] = value;
        Py_XDECREF(old);
    }
    for (Py_ssize_t i = 0; i < m->n_regs; i++) Py_XDECREF(regs[i]);
    if (regs != stack_regs) PyMem_Free(regs);
    if (result < 0) return NULL;
    return Py_NewRef(result ? Py_True : Py_False);
}

static void machine_dealloc(Machine *m) {
    PyObject_GC_UnTrack(m);
    Py_CLEAR(m->consts);
    Py_CLEAR(m->reader_capsule);
    PyMem_Free(m->code);
    Py_TYPE(m)->tp_free((PyObject *)m);
}

static int machine_traverse(Machine *m, visitproc visit, void *arg) {
    Py_VISIT(m->consts);
    return 0;
}

static int machine_clear(Machine *m) {
    Py_CLEAR(m->consts);
    return 0;
}

/* make(code: bytes of int32 quadruples, consts: tuple, n_regs: int, n_args: int, reader: capsule | None)
 * -> machine */
static PyObject *make(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5 || !PyBytes_Check(args[0]) || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "make(code: bytes, consts: tuple, n_regs: int, n_args: int, reader)");
        return NULL;
    }
    fact_reader read_fact = NULL;
    if (args[4] != Py_None) {
        read_fact = (fact_reader)PyCapsule_GetPointer(args[4], "dynajit_tensor_facts.reader");
        if (read_fact == NULL) return NULL;
    }
    Py_ssize_t size = PyBytes_GET_SIZE(args[0]);
    Py_ssize_t n_regs = PyLong_AsSsize_t(args[2]), n_args = PyLong_AsSsize_t(args[3]);
    if ((n_regs < 0 || n_args < 0) && PyErr_Occurred()) return NULL;
    if (size % (Py_ssize_t)sizeof(Instr) != 0) {
        PyErr_SetString(PyExc_ValueError, "code is not a whole number of instructions");
        return NULL;
    }
    Machine *m = PyObject_GC_New(Machine, &MachineType);
    if (m == NULL) return NULL;
    m->vectorcall = machine_call;
    m->n_instr = size / (Py_ssize_t)sizeof(Instr);
    m->n_regs = n_regs;
    m->n_args = n_args;
    m->code = PyMem_Malloc((size_t)size + 1);
    m->consts = Py_NewRef(args[1]);
    m->reader_capsule = args[4] == Py_None ? NULL : Py_NewRef(args[4]);
    m->read_fact = read_fact;
    if (m->code == NULL) {
        Py_DECREF(m);
        return PyErr_NoMemory();
    }
    memcpy(m->code, PyBytes_AS_STRING(args[0]), (size_t)size);
    PyObject_GC_Track(m);
    return (PyObject *)m;
}

static PyTypeObject MachineType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dynajit_guard_machine.Machine",
    .tp_basicsize = sizeof(Machine),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(Machine, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_dealloc = (destructor)machine_dealloc,
    .tp_traverse = (traverseproc)machine_traverse,
    .tp_clear = (inquiry)machine_clear,
};

static PyMethodDef methods[] = {
    {"make", (PyCFunction)(void (*)(void))make, METH_FASTCALL, "A guard machine running a program."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "dynajit_guard_machine", NULL, -1, methods};

PyMODINIT_FUNC PyInit_dynajit_guard_machine(void) {
    if (PyType_Ready(&MachineType) < 0) return NULL;
    PyObject *globals = PyDict_New();
    if (globals == NULL || PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins()) < 0) {
        Py_XDECREF(globals);
        return NULL;
    }
    PyObject *ran = PyRun_String("class WithGetattr:\n    def __getattr__(self, name):\n        raise AttributeError(name)\n",
                                 Py_file_input, globals, globals);
    PyObject *probe = ran == NULL ? NULL : PyDict_GetItemString(globals, "WithGetattr");
    Py_XDECREF(ran);
    if (probe == NULL || !PyType_Check(probe)) {
        Py_DECREF(globals);
        return NULL;
    }
    hook_getattro = ((PyTypeObject *)probe)->tp_getattro;
    Py_DECREF(globals);
    getattribute_name = PyUnicode_InternFromString("__getattribute__");
    if (getattribute_name == NULL) return NULL;
    object_getattribute = _PyType_Lookup(&PyBaseObject_Type, getattribute_name); /* (lives as long as object) */
    if (object_getattribute == NULL) return NULL;
    return PyModule_Create(&module_def);
}
