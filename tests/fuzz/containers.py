"""The fuzzer's loops and containers: statements that build, index and iterate lists, tuples and dicts.

Loops run over ranges, lists, ``unbind``, ``enumerate`` and shapes; over
dicts, sequences and deques whose body writes the item reached next; and
over live iterators (``reversed``, ``zip``, ``enumerate``, a named iterator)
whose list the body changes or advances. Containers are built, indexed,
unpacked and appended; comprehensions and closures carry values across a
graph break. Each statement goes through the generator's ``_try``, which
keeps it only if the program still runs eagerly on every call.
:class:`ContainerMixin` is mixed into the generator, which owns the state
named in its annotations.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from .features import Features
from .program import Stmt


class ContainerMixin:
    """Loop and container statements for :class:`tests.fuzz.generator.Generator`."""

    rng: random.Random
    features: Features
    counter: int
    tensor: Callable[..., str | None]
    value: Callable[[str], Any]
    fresh: Callable[..., str]
    _pick: Callable[[list[str]], str | None]
    _tensors: Callable[..., list[str]]
    _try: Callable[[Stmt], bool]
    _broadcast_partner: Callable[[str], str]

    def loop(self) -> bool:
        rng = self.rng
        a = self.tensor()
        if a is None:
            return False
        acc = self.fresh()
        kind = rng.choice(["range", "list", "unbind", "enumerate", "shape", "written_ahead", "live_iterator"])
        t = self.value(a)
        other = self._broadcast_partner(a)
        if kind == "written_ahead":
            return self._loop_writing_ahead(a, other, acc)
        if kind == "live_iterator":
            return self._loop_over_live_iterator(a, other, acc)
        if kind == "range":
            header, body = f"for i in range({rng.randint(1, 3)}):", f"{acc} = {acc} * 0.5 + {other} * i"
        elif kind == "list":
            header, body = (
                f"for t in [{a}, {other}]:",
                f"{acc} = {acc} + t.{rng.choice(['sin', 'abs', 'neg', 'relu'])}()",
            )
        elif kind == "unbind" and t.dim() >= 1 and t.shape[0] <= 8:
            header, body = f"for t in {a}.unbind(0):", f"{acc} = {acc} + t.sum()"
        elif kind == "enumerate":
            header, body = f"for i, t in enumerate(({a}, {other})):", f"{acc} = {acc} - t * (i + 1)"
        else:
            header, body = (
                f"for i in range(min({a}.dim(), 3)):",
                f"{acc} = {acc} + {a}.sum(i, keepdim=True) if {a}.dim() else {acc}",
            )
        init = Stmt([f"{acc} = {a}.clone()" if rng.random() < 0.5 else f"{acc} = {a} * 1"])
        return self._try(Stmt(init.lines, clauses=[(header, [Stmt([body])])], alts=[[init]]))

    def _loop_writing_ahead(self, a: str, other: str, acc: str) -> bool:
        """A loop over a dict's values or items, a ``Window`` sequence or a deque whose body writes the item the
        loop reaches next (each step must read the container as it is then), or a dict's keys whose body swaps
        a key for a new one at the same size (what Python yields next depends on the dict's layout), with a
        break inside on some."""
        rng, box = self.rng, self.fresh("c")
        kind = rng.choice(["values", "items", "window", "deque", "rekey"])
        swap = f"'{rng.choice('abc')}'"  # the key whose step swaps; the removed one is reached later or was passed
        make = {
            "values": f"{box} = {{'a': {a}, 'b': {other}}}",
            "items": f"{box} = {{'a': {a}, 'b': {other}, 'c': {a}}}",
            "window": f"{box} = Window([{a}, {other}, {a}])",
            "deque": f"{box} = collections.deque([{a}, {other}])",
            "rekey": f"{box} = {{'a': {a}, 'b': {other}, 'c': {a}}}",
        }[kind]
        header = {
            "values": f"for v in {box}.values():",
            "items": f"for k, v in {box}.items():",
            "window": f"for i, v in enumerate({box}):",
            "deque": f"for i, v in enumerate({box}):",
            "rekey": f"for k in {box}:",
        }[kind]
        ahead = {
            "values": f"{box}['b'] = v * 2",
            "items": f"{box}['c'] = v - 1" if rng.random() < 0.5 else f"{box}[k] = v + 1",
            "window": f"{box}.data[-1] = v * 3",
            "deque": f"{box}[-1] = v + 2" if rng.random() < 0.5 else f"{box}.reverse()",
            "rekey": f"{box}.update(z={box}.pop('{rng.choice('ac')}')) if k == {swap} and 'z' not in {box} else None",
        }[kind]
        body = [f"{acc} = {acc} + " + (f"{box}[k]" if kind == "rekey" else "v"), ahead]
        if self.features.graph_breaks and rng.random() < 0.3:
            body.insert(1, rng.choice(['print(end="")', "dynajit.capture.graph_break()"]))
        init = Stmt([f"{acc} = {a} * 1", make])
        if kind == "rekey":  # Python may raise "dictionary keys changed during iteration": the program catches it
            loop = Stmt(clauses=[(header, [Stmt(body)])])
            caught = [("try:", [loop]), ("except RuntimeError:", [Stmt([f"{acc} = {acc} * 2 + 1"])])]
            return self._try(Stmt(init.lines, clauses=caught, alts=[[init]]))
        return self._try(Stmt(init.lines, clauses=[(header, [Stmt(body)])], alts=[[init]]))

    def _loop_over_live_iterator(self, a: str, other: str, acc: str) -> bool:
        """A loop over an iterator that stays live while its list changes or the body advances it: ``reversed``
        of a list the body pops from or grows, ``zip``/``enumerate`` over lists the body changes, a list the body
        shrinks below the iterator's position and grows past it again, and a named iterator the body also steps
        with ``next`` (each step must see the list and the iterator as they are then), with a break inside on
        most."""
        rng, box, more, it = self.rng, self.fresh("c"), self.fresh("c"), self.fresh("it")
        kind = rng.choice(["reversed", "zip", "enumerate", "shrunk", "next"])
        bounded = f"len({box}) < 5"  # growth stops, so every loop ends
        make = {
            "reversed": [f"{box} = [{a}, {other}, {a}]"],
            "zip": [f"{box} = [{a}, {other}, {a}]", f"{more} = [{other}, {a}, {other}, {a}]"],
            "enumerate": [f"{box} = [{a}, {other}]"],
            "shrunk": [f"{box} = [{a}, {other}, {a}, {other}]"],
            "next": [f"{box} = [{a}, {other}, {a}, {other}, {a}]", f"{it} = iter({box})"],
        }[kind]
        header = {
            "reversed": f"for v in reversed({box}):",
            "zip": f"for v, w in zip({box}, {more}):",
            "enumerate": f"for i, v in enumerate({box}):",
            "shrunk": f"for v in {box}:",
            "next": f"for v in {it}:",
        }[kind]
        step = {
            "reversed": [f"{box}.pop(0)", f"{box}.append(v * 2) if {bounded} else None", f"{box}.insert(0, v)"],
            "zip": [
                f"{more}.pop() if {more} else None",
                f"{box}.insert(0, v) if {bounded} else None",
                f"{more}.clear()",
            ],
            "enumerate": [f"{box}.append(v + i) if {bounded} else None", f"{box}.pop() if i == 0 else None"],
            # below the position (a step past the end is not the end yet), then past it again
            "shrunk": [f"if len({box}) > 2: del {box}[:2]", f"{box}.extend([v, v * 2]) if {bounded} else None"],
            "next": [
                f"{acc} = {acc} + next({it}, {a})",
                f"next({it}, None)",
                f"{box}.append(v) if {bounded} else None",
            ],
        }[kind]
        use = f"{acc} = {acc} + v" + (" - w" if kind == "zip" else "")
        body = [use, *step] if kind == "shrunk" else [use, rng.choice(step)]
        if self.features.graph_breaks and rng.random() < 0.6:
            body.insert(rng.randint(1, len(body)), rng.choice(['print(end="")', "dynajit.capture.graph_break()"]))
        init = Stmt([f"{acc} = {a} * 1", *make])
        return self._try(Stmt(init.lines, clauses=[(header, [Stmt(body)])], alts=[[init]]))

    def container(self) -> bool:
        rng = self.rng
        names = self._tensors()
        if not names:
            return False
        items = [self._pick(names) for _ in range(rng.randint(1, 3))]
        kinds = ["lst", "tup", "d"] + (["comp", "cell"] if self.features.graph_breaks else [])
        name = self.fresh(rng.choice(kinds))
        if name.startswith(("comp", "cell")):
            return self._try(Stmt(self._across_a_break(name, items[0])))
        if name.startswith("lst") and rng.random() < 0.4:
            return self._try(Stmt(self._grown_in_place(name, items)))
        if name.startswith("tup") and rng.random() < 0.3:
            return self._try(self._tuple_item_extended(name, items))
        if name.startswith("lst"):
            lines = [f"{name} = [{', '.join(items)}]", f"{name}.append({items[0]} * 2)"]
            use = [f"{name}[-1]", f"{name}[0] + {name}[-1]", f"torch.stack({name})", f"sum({name})"]
        elif name.startswith("tup"):
            lines = [f"{name} = ({''.join(i + ', ' for i in items)})"]
            use = [f"{name}[0]", f"{name}[-1] * len({name})"]
            if len(items) == 2:
                lines.append(f"p{self.counter}, q{self.counter} = {name}")
                use += [f"q{self.counter} - p{self.counter}"]
        else:
            lines = [
                f"{name} = {{{', '.join(f'{chr(97 + i)!r}: {it}' for i, it in enumerate(items))}}}",
                f"{name}['z'] = {items[0]}",
            ]
            use = [f"{name}['a']", f"{name}['z'] * 2", f"sum(v.sum() for v in {name}.values())"]
        target = self.fresh()
        lines.append(f"{target} = {rng.choice(use)}")
        return self._try(Stmt(lines))

    def _grown_in_place(self, name: str, items: list[str]) -> list[str]:
        """Lists of tensors and of constants grown by ``+=`` and ``*=``, read through aliases made before (each
        operator extends the list itself), with a break between on some."""
        rng, target = self.rng, self.fresh()
        alias, counts, seen = self.fresh("al"), self.fresh("cnt"), self.fresh("cnt")
        lines = [f"{name} = [{', '.join(items)}]", f"{alias} = {name}", f"{counts} = [{rng.randint(0, 2)}]"]
        lines.append(f"{seen} = {counts}")
        if self.features.graph_breaks and rng.random() < 0.4:
            lines.append(rng.choice(['print(end="")', "dynajit.capture.graph_break()"]))
        lines.append(rng.choice([f"{name} += [{items[0]} * 2]", f"{name} *= 2", f"{name} += ({items[-1]},)"]))
        grow = [f"{counts} += [len({name})]", f"{counts} *= 3", f"{counts} += range(2)"]
        if rng.random() < 0.3:  # a set of constants, changed by its in-place operators
            lines[2] = f"{counts} = {{{rng.randint(0, 2)}, 5}}"
            grow = [f"{counts} |= {{len({name})}}", f"{counts} -= {{5}}", f"{counts} ^= {{1, 7}}"]
        lines.append(rng.choice(grow))
        use = [f"{alias}[-1] * len({seen})", f"torch.stack({alias}).sum(0) + sum({seen})"]
        return [*lines, f"{target} = {rng.choice(use)}"]

    def _tuple_item_extended(self, name: str, items: list[str]) -> Stmt:
        """``pair[0] += [...]`` in a try block: the list is extended, then the tuple's item assignment raises
        TypeError (a graph break, the block's last instruction) into a handler reading a local made before."""
        kept, target = self.fresh("kp"), self.fresh()
        handler = Stmt([f"{target} = {kept} + len({name}[0])"])
        clauses = [("try:", [Stmt([f"{name}[0] += [{items[-1]}]"])]), ("except TypeError:", [handler])]
        return Stmt([f"{kept} = {items[0]} * 2", f"{name} = ([{items[0]}], [1])"], clauses=clauses)

    def _across_a_break(self, name: str, item: str) -> list[str]:
        """A comprehension whose element breaks the graph (3.12 inlines it: the list being built is on the stack
        at the break), or a local a closure reads, rebound after a break (the resume function must share its cell)."""
        rng, brk, target = self.rng, self.rng.choice(['print(end="")', "dynajit.capture.graph_break()"]), self.fresh()
        k = f"k{self.counter}"
        if name.startswith("comp"):
            if rng.random() < 0.5:
                return [
                    f"{name} = [{brk} or {item} * ({k} + 1) for {k} in range({rng.randint(1, 3)})]",
                    f"{target} = {rng.choice([f'{name}[-1]', f'sum({name})', f'torch.stack({name})'])}",
                ]
            return [
                f"{name} = {{{k}: {brk} or {item} + {k} for {k} in range({rng.randint(1, 3)})}}",
                f"{target} = {name}[0] * len({name})",
            ]
        read = f"read{self.counter}"  # (no `nonlocal`: bodies are also run at module level while generating)
        return [f"{name} = {item} * 2", f"def {read}():", f"    return {name}", f"{target} = {read}()", brk,
                f"{name} = {name} + 1", f"{target} = {target} + {read}()"]  # fmt: skip
