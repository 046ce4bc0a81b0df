"""``disallow_in_graph`` refuses user functions, with a message pointing to ``disable`` and ``graph_break``."""

from __future__ import annotations

import pytest

from dynajit import _dynamo


def helper(x):
    return x + 1


class Holder:
    def method(self, x):
        return x


@pytest.mark.parametrize("fn", [helper, Holder().method, [helper]], ids=["function", "method", "list"])
def test_a_user_function_is_refused_with_the_alternatives(fn):
    with pytest.raises(ValueError, match=r"is a user function.*compiler\.disable\(fn\).*graph_break\(\)"):
        _dynamo.disallow_in_graph(fn)
