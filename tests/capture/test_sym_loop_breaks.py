"""Graph breaks inside ``for`` loops: the loop resumes in compiled code with the iterator's state.

The iterator on the stack at the break is handed to the resume function as
what it iterates over (the remaining items, or a list and the position
reached) and made again there, so each segment of the unrolled loop compiles
its own graph instead of the rest of the frame running in Python.
"""

import pytest
import torch

import dynajit.capture as capture

pytestmark = pytest.mark.filterwarnings("error:dynajit:RuntimeWarning")

torch.manual_seed(0)


SEQ = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh(), torch.nn.Linear(4, 4))
LAYERS = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(3)])
TABLE = {"a": 1.5, "b": -2.0, "c": 0.5}


def brk():
    print(end="")


def over_sequential(x):
    for m in SEQ:
        x = m(x)
        brk()
    return x


def over_module_list_enumerate(x):
    for i, layer in enumerate(LAYERS):
        x = layer(x) * (i + 1)
        brk()
    return x


def over_range(x):
    for i in range(1, 4):
        x = x * i
        brk()
        x = x - i
    return x


def over_zip(x):
    for scale, shift in zip((1.0, 2.0, 3.0), [x, x + 1, x * 2]):
        x = x * scale + shift
        brk()
    return x


def over_dict_items_and_keys(x):
    for key, value in TABLE.items():
        x = x * value + len(key)
        brk()
    for key in TABLE:
        x = x + TABLE[key]
        brk()
    for value in TABLE.values():
        x = x - value
        brk()
    return x


def over_new_list(x):
    for t in [x, x + 1, x * 3]:
        x = x + t
        brk()
    return x


def over_list_argument(x, items):
    for t in items:
        x = x * t
        brk()
    return x


def over_tuple_argument(x, items):
    for t in items:
        x = x - t
        brk()
    return x


def appends_while_iterating(x, items):
    # Python iterates the items appended to the list after the break too
    for t in items:
        x = x + t
        brk()
        if len(items) < 5:
            items.append(t * 2)
    return x, len(items)


def shrink(items):
    brk()
    items.pop()


def shrinks_at_the_break(x, items):
    # the call that breaks the graph shortens the list being iterated: the loop ends sooner
    n = 0
    for t in items:
        x = x + t
        n += 1
        shrink(items)
    return x, n


def nested_loops(x):
    for i in range(2):
        for layer in LAYERS:
            x = layer(x) + i
            brk()
    return x


def branch_in_loop(x):
    for layer in LAYERS:
        x = layer(x)
        if x.sum() > 0:
            x = x * 0.5
        else:
            x = x + 1
    return x


def early_exit(x):
    for i in range(10):
        x = x + i
        brk()
        if i == 2:
            break
    else:
        x = x * 100
    return x


def over_reversed(x):
    for layer in reversed(LAYERS):
        x = layer(x)
        brk()
    return x


def looping_helper(x):
    for layer in LAYERS:
        x = layer(x)
        brk()
    return x


def calls_looping_helper(x):
    return looping_helper(x * 2) + 1


def check_resumed(check, fn, *args, **kwargs):
    """The differential check, and no frame ran in Python for a break it could not resume."""
    with capture.observe() as seen:
        counter = check(fn, *args, **kwargs)
    reasons = [brk.reason for frame in seen.frames for brk in frame.graph_breaks]
    assert not [r for r in reasons if "cannot be resumed" in r or "not repeatable" in r], reasons
    assert not [f for f in seen.frames if f.kind in ("eager", "error")]
    return counter


@pytest.mark.parametrize(
    "fn,graphs",
    [
        (over_sequential, 3),
        (over_module_list_enumerate, 3),
        (over_range, 4),
        (over_zip, 3),
        (over_dict_items_and_keys, 9),
        (over_new_list, 3),
        (nested_loops, 6),
        (early_exit, 3),
        (over_reversed, 3),
    ],
    ids=lambda c: getattr(c, "__name__", str(c)),
)
def test_break_in_loop_compiles_each_segment(check, t, fn, graphs):
    check_resumed(check, fn, t(2, 4), graphs=graphs, calls=2)


def test_list_argument(check, t):
    check_resumed(check, over_list_argument, t(4), [t(4), t(4), t(4)], graphs=3, calls=2)


def test_tuple_argument(check, t):
    check_resumed(check, over_tuple_argument, t(4), (t(4), t(4), t(4)), graphs=3, calls=2)


def test_appends_while_iterating(check, t):
    check_resumed(check, appends_while_iterating, t(4), [t(4), t(4)], calls=2)


def test_list_shrinks_at_the_break(check, t):
    check_resumed(check, shrinks_at_the_break, t(4), [t(4), t(4), t(4), t(4)], calls=2)


def test_tensor_branch_in_loop(check):
    gen = torch.Generator().manual_seed(7)
    check_resumed(check, branch_in_loop, calls=6, make_args=lambda: (torch.randn(2, 4, generator=gen),))


def test_loop_in_inlined_callee(check, t):
    check_resumed(check, calls_looping_helper, t(2, 4), calls=2)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        x = self.lin(x).relu()
        brk()  # a graph break in every block
        return x + 1


BLOCKS = torch.nn.Sequential(Block(), Block(), Block())


def calls_blocks(x):
    return BLOCKS(x)


@capture.disable(recursive=False)
def calls_blocks_frame_only(x):
    return BLOCKS(x)


def calls_blocks_in_unresumable_frame(x):
    with torch.autocast("cpu", enabled=False):
        brk()  # this frame runs in Python with its call sites intercepted
        return BLOCKS(x)


@pytest.mark.parametrize("target", [BLOCKS, calls_blocks], ids=["the_sequential", "a_function_calling_it"])
def test_sequential_of_breaking_blocks_compiles_every_block(check, t, target):
    # Sequential.forward is a frame of its own, cut at each block's call: every block compiles its graph
    # before the break (linear, relu) and the resume graph after it (shared by the blocks), none runs in Python.
    counter = check_resumed(check, target, t(2, 4), calls=2)
    assert (counter.frame_count, counter.op_count) == (4, 7)


@pytest.mark.parametrize("target", [calls_blocks_frame_only, calls_blocks_in_unresumable_frame])
def test_blocks_called_from_a_frame_running_in_python_still_compile(check, t, target):
    counter = check(target, t(2, 4), calls=2)
    assert (counter.frame_count, counter.op_count) == (4, 7)


def long_loop(x, n):
    for i in range(n):
        x = x + i
        brk()
    return x


def test_long_loop_stops_unrolling(check, t, monkeypatch):
    # Each step's resume function is called by the previous step's code: past MAX_LOOP_STEPS steps the
    # rest of the loop runs in Python instead of nesting deeper (400 nested steps exhausted the recursion
    # limit). A smaller limit keeps the test fast.
    from dynajit.capture._symbolic import resume

    monkeypatch.setattr(resume, "MAX_LOOP_STEPS", 8)
    counter = check(long_loop, t(3), 400, calls=2)
    assert counter.frame_count == 8 + 1


def two_breaks_per_step(x):
    for i in range(6):
        x = x + i
        print(end="")
        x = x * 2
        print(end="")
    return x


def test_resuming_a_resume_function_reuses_the_original_code(check, t):
    # A resume function of a resume function is made from the original code: one per (target, layout).
    with capture.observe() as seen:
        check(two_breaks_per_step, t(3), calls=2)
    names = {frame.name for frame in seen.frames if frame.name.startswith("__resume")}
    offsets = {name.split("_")[4] for name in names}
    assert len(offsets) == 2, names  # the two targets, whatever the nesting
