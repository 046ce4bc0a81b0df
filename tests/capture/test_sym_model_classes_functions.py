"""Attributes of functions that library code reads: ``__class__`` (torchvision's API-usage logging)."""

import types

import torch


def stochastic_depth(t):
    return t


def log_api_usage_once(obj):
    """torchvision.utils._log_api_usage_once: names its caller by module and class (or function) name."""
    module = obj.__module__
    name = obj.__class__.__name__
    if isinstance(obj, types.FunctionType):
        name = obj.__name__
    return f"{module}.{name}"


def uses_logged_function(t):
    key = log_api_usage_once(stochastic_depth)
    return stochastic_depth(t) * len(key)


def test_class_of_a_global_function(check, t):
    check(uses_logged_function, t(4), graphs=1, fullgraph=True)


def class_of_a_nested_function(t):
    def inner(x):
        return x + 1

    return inner(t) if inner.__class__ is types.FunctionType else t


def test_class_of_a_nested_function(check, t):
    check(class_of_a_nested_function, t(4), graphs=1, fullgraph=True)


def class_name_branch(t):
    return t * 2 if stochastic_depth.__class__.__name__ == "function" else t


def test_class_name_of_a_function_is_constant(check, t):
    counter = check(class_name_branch, t(4), graphs=1, fullgraph=True, calls=2)
    assert "mul" in counter.graphs[0].code


def test_module_class_is_not_a_function(check, t):
    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 4)
    check(lambda x: lin(x) if log_api_usage_once(lin).endswith("Linear") else x, t(2, 4), graphs=1)
