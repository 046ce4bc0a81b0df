"""Variable trackers: the abstract values the symbolic interpreter keeps on its stack and in its locals."""

from dynajit.capture._symbolic.variables.base import (
    VT,
    AttributeMissing,
    NullVar,
    RaisesInPython,
    attribute_missing,
    raises_in_python,
    unsupported,
)
from dynajit.capture._symbolic.variables.classes import ClassVar
from dynajit.capture._symbolic.variables.constant import ConstVar, is_literal
from dynajit.capture._symbolic.variables.containers import (
    DictVar,
    DictViewVar,
    ListVar,
    SetVar,
    SizeVar,
    SliceVar,
    TupleVar,
)
from dynajit.capture._symbolic.variables.functions import (
    BoundMethodVar,
    BuiltinVar,
    CellVar,
    NestedFunctionVar,
    UserFunctionVar,
)
from dynajit.capture._symbolic.variables.item_iterators import IteratorVar
from dynajit.capture._symbolic.variables.modules import ModuleSliceVar, NNModuleVar
from dynajit.capture._symbolic.variables.new_objects import NewObjectVar
from dynajit.capture._symbolic.variables.objects import ExceptionVar, ObjectVar, PyModuleVar, UserObjectVar
from dynajit.capture._symbolic.variables.tensor import TensorMethodVar, TensorVar, TorchFunctionVar

__all__ = [
    "VT",
    "AttributeMissing",
    "BoundMethodVar",
    "BuiltinVar",
    "CellVar",
    "ClassVar",
    "ConstVar",
    "DictVar",
    "DictViewVar",
    "IteratorVar",
    "ListVar",
    "ExceptionVar",
    "ModuleSliceVar",
    "NNModuleVar",
    "NewObjectVar",
    "NestedFunctionVar",
    "NullVar",
    "RaisesInPython",
    "ObjectVar",
    "PyModuleVar",
    "SetVar",
    "SizeVar",
    "SliceVar",
    "TensorMethodVar",
    "TensorVar",
    "TorchFunctionVar",
    "TupleVar",
    "UserFunctionVar",
    "UserObjectVar",
    "attribute_missing",
    "is_literal",
    "raises_in_python",
    "unsupported",
]
