"""Guard-soundness cases (registered in guard_cases.CASES): attributes of objects and classes.

An attribute added, removed, shadowed or changed on an object or its class; a method, property, class or bound
method swapped; an object's type or identity changed.
"""

from __future__ import annotations

import dataclasses

from guard_cases import Holder, _ones, case


@case
def attr_added_to_object_read_with_getattr_default():
    class Cfg:
        pass

    cfg = Cfg()

    def f(x):
        return x + 7 if getattr(cfg, "just_add_7", False) else x - 1

    return f, _ones(2), lambda: setattr(cfg, "just_add_7", True)


@case
def attr_removed_from_object():
    class Cfg:
        pass

    cfg = Cfg()
    cfg.scale = 2.0

    def f(x):
        return x * getattr(cfg, "scale", 10.0)

    return f, _ones(2), lambda: delattr(cfg, "scale")


@case
def attr_added_to_object_tested_with_hasattr():
    class Cfg:
        pass

    cfg = Cfg()

    def f(x):
        return x + 1 if hasattr(cfg, "enabled") else x - 1

    return f, _ones(2), lambda: setattr(cfg, "enabled", 0)


@case
def attr_value_changed_on_object():
    class Cfg:
        scale = 1

    cfg = Cfg()
    cfg.scale = 2

    def f(x):
        return x * cfg.scale

    return f, _ones(2), lambda: setattr(cfg, "scale", 3)


@case
def attr_added_to_class():
    class Cfg:
        pass

    cfg = Cfg()

    def f(x):
        return x * getattr(cfg, "factor", 2)

    return f, _ones(2), lambda: setattr(Cfg, "factor", 5)


@case
def class_attr_changed():
    class Cfg:
        eps = 1.0

    cfg = Cfg()

    def f(x):
        return x + cfg.eps

    return f, _ones(2), lambda: setattr(Cfg, "eps", 4.0)


@case
def instance_attr_shadows_class_attr():
    class Cfg:
        eps = 1.0

    cfg = Cfg()

    def f(x):
        return x + cfg.eps

    return f, _ones(2), lambda: setattr(cfg, "eps", 5.0)


@case
def instance_attr_shadows_method():
    class Scaler:
        def factor(self):
            return 2

    s = Scaler()

    def f(x):
        return x * s.factor()

    return f, _ones(2), lambda: setattr(s, "factor", lambda: 3)


@case
def method_replaced_on_class():
    class Scaler:
        def factor(self):
            return 2

    s = Scaler()

    def f(x):
        return x * s.factor()

    return f, _ones(2), lambda: setattr(Scaler, "factor", lambda self: 4)


@case
def property_replaced_on_class():
    class Box:
        @property
        def size(self):
            return 2

    b = Box()

    def f(x):
        return x * b.size

    return f, _ones(2), lambda: setattr(Box, "size", property(lambda self: 6))


@case
def object_type_swapped():
    class A:
        def k(self):
            return 1

    class B:
        def k(self):
            return 2

    holder = Holder(obj=A())

    def f(x):
        return x * holder.obj.k()

    return f, _ones(2), lambda: setattr(holder, "obj", B())


@case
def isinstance_of_swapped_object():
    class Base:
        pass

    class Child(Base):
        pass

    holder = Holder(obj=Base())

    def f(x):
        return x + 1 if isinstance(holder.obj, Child) else x - 1

    return f, _ones(2), lambda: setattr(holder, "obj", Child())


@case
def slot_attribute_set_later():
    class Slotted:
        __slots__ = ("value",)

    s = Slotted()

    def f(x):
        return x * getattr(s, "value", 1)

    return f, _ones(2), lambda: setattr(s, "value", 7)


@case
def dataclass_field_changed():
    @dataclasses.dataclass
    class Options:
        scale: float = 1.0
        shift: int = 0

    opts = Options()

    def f(x):
        return x * opts.scale + opts.shift

    return f, _ones(2), lambda: setattr(opts, "shift", 3)


@case
def instance_dict_key_added():
    class Cfg:
        pass

    cfg = Cfg()
    cfg.a = 1

    def f(x):
        return x + len(cfg.__dict__)

    return f, _ones(2), lambda: setattr(cfg, "b", 2)


@case
def aliased_object_one_path_rebound():
    class Cfg:
        pass

    cfg = Cfg()
    cfg.scale = 2
    holder = Holder(a=cfg, b=cfg)

    def f(x):
        return x * holder.a.scale + holder.b.scale

    def mutate():
        other = Cfg()
        other.scale = 10
        holder.b = other

    return f, _ones(2), mutate


@case
def object_becomes_callable():
    class Plain:
        pass

    class Calls:
        def __call__(self):
            return 1

    holder = Holder(obj=Plain())

    def f(x):
        return x + 1 if callable(holder.obj) else x - 1

    return f, _ones(2), lambda: setattr(holder, "obj", Calls())


@case
def object_identity_compared():
    a = type("A", (), {})()
    holder = Holder(first=a, second=a)

    def f(x):
        return x + 1 if holder.first is holder.second else x - 1

    return f, _ones(2), lambda: setattr(holder, "second", type(a)())


@case
def bound_method_rebound_to_other_instance():
    class Scaler:
        def __init__(self, k):
            self.k = k

        def apply(self, x):
            return x * self.k

    holder = Holder(fn=Scaler(2).apply)

    def f(x):
        return holder.fn(x)

    return f, _ones(2), lambda: setattr(holder, "fn", Scaler(5).apply)


@case
def object_class_reassigned():
    class A:
        def k(self):
            return 1

    class B:
        def k(self):
            return 2

    obj = A()

    def f(x):
        return x * obj.k()

    return f, _ones(2), lambda: setattr(obj, "__class__", B)


@case
def classmethod_reads_changed_class_state():
    class Counter:
        step = 1

        @classmethod
        def size(cls):
            return cls.step * 2

    def f(x):
        return x * Counter.size()

    return f, _ones(2), lambda: setattr(Counter, "step", 4)


@case
def staticmethod_replaced():
    class Ops:
        @staticmethod
        def k():
            return 2

    obj = Ops()

    def f(x):
        return x * obj.k()

    return f, _ones(2), lambda: setattr(Ops, "k", staticmethod(lambda: 9))


@case
def getattr_through_python_getattribute():
    class Proxy:
        def __init__(self):
            self.inner = 2

        def __getattribute__(self, name):
            if name == "value":
                return object.__getattribute__(self, "inner") * 10
            return object.__getattribute__(self, name)

    proxy = Proxy()

    def f(x):
        return x * proxy.value

    return f, _ones(2), lambda: setattr(proxy, "inner", 3)
