"""Module and attribute names that are not Python identifiers still give valid, distinct graph attribute names."""

import torch
from torch import nn


def run(m, *args):
    return m(*args)


def test_submodule_named_with_a_dash(check, t):
    torch.manual_seed(0)
    model = nn.Sequential()
    model.add_module("block1-0", nn.Linear(4, 4))  # torchvision RegNet names its blocks so
    model.add_module("block1-1", nn.Linear(4, 4))
    counter = check(run, model, t(2, 4), graphs=1, fullgraph=True)
    names = [n.target for n in counter.graphs[0].graph.nodes if n.op == "get_attr"]
    assert len(names) == len(set(names)) == 4, names
    assert all(part.isidentifier() for name in names for part in name.split(".")), names


class Clashing(nn.Module):
    """Children whose names differ only in characters an identifier cannot hold."""

    def __init__(self):
        super().__init__()
        self.add_module("a-b", nn.Linear(3, 3))
        self.add_module("a_b", nn.Linear(3, 3))
        self.add_module("a.b".replace(".", "+"), nn.Linear(3, 3))
        self.add_module("x²", nn.Linear(3, 3))

    def forward(self, x):
        for child in self.children():
            x = child(x)
        return x


def test_names_that_sanitise_alike_stay_distinct(check, t):
    torch.manual_seed(0)
    counter = check(run, Clashing(), t(2, 3), graphs=1, fullgraph=True, calls=2)
    names = [n.target for n in counter.graphs[0].graph.nodes if n.op == "get_attr"]
    assert len(names) == len(set(names)) == 8, names
    assert all(name.isidentifier() for name in names), names
