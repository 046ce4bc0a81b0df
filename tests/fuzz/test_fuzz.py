"""The fuzzer's CI budget: a fixed seeded set of programs must all agree with eager, plus checks of the fuzzer itself.

The budget runs the CI feature set (``CI_EXCLUDED`` names each feature left
out and the failure class that keeps it out). A failure prints the shrunk
standalone repro. Longer runs: ``python -m tests.fuzz --minutes 30`` or
``nox -s fuzz -- --minutes 30``.
"""

from __future__ import annotations

import collections.abc
import contextlib
import logging
import re
from typing import Any
from unittest import mock

import pytest
import torch

from .cli import fuzz
from .features import CI_EXCLUDED, Features
from .flow import HANDLED
from .generator import generate
from .program import ArgSpec, Program, Stmt, repro_script
from .runner import Failure, _compare_grads, check, compare_outputs, layout_timings_restored
from .shrink import shrink

CI_SEED = "ci"
CI_COUNT = 60  # about 2-3 minutes on two cores


@pytest.fixture(autouse=True)
def _layout_timings_kept():
    """A test that runs a generated program's source itself runs its forced layout timings too: they are undone
    after it, or every later test in the process (the channels-last pass's own) compiled on the forced ones."""
    with layout_timings_restored():
        yield


def test_generation_is_reproducible() -> None:
    for i in range(5):
        assert generate(f"r:{i}").source() == generate(f"r:{i}").source()


def test_programs_run_eagerly_on_every_call() -> None:
    # The generator keeps only statements that run (or a deliberate raising last one).
    for i in range(10):
        program = generate(f"e:{i}", Features().without("errors"))
        namespace: dict = {}
        exec(program.source(), namespace)
        for call, sizes in enumerate(namespace["CALLS"]):
            namespace["fn"](*namespace["make_args"](sizes, call))


def test_every_feature_can_be_switched_off() -> None:
    everything_off = Features().only("pointwise")
    for i in range(5):
        source = generate(f"f:{i}", everything_off).source()
        body = source.split("def fn", 1)[1].split("CALLS =")[0]
        assert "if " not in body and "for " not in body and "def " not in body
        assert ".add_(" not in body and "graph_break" not in body and "print(" not in body


def test_comparison_catches_each_kind_of_difference() -> None:
    x = torch.arange(6.0).view(2, 3)
    assert compare_outputs((x,), (x + 1,), [], [])[0] == "value"
    assert compare_outputs((x,), (x.double(),), [], [])[0] == "dtype"
    assert compare_outputs((x,), (x.view(3, 2),), [], [])[0] == "shape"
    assert compare_outputs((x,), (x.t().contiguous().t(),), [], [])[0] == "stride"
    assert compare_outputs((x,), [x], [], [])[0] == "structure"
    y = x.clone()
    assert compare_outputs((x[0],), (y.clone()[0],), [x], [y])[0] == "alias"
    assert compare_outputs((x,), (y[:],), [x], [y])[0] == "identity"  # (``x.mul_(2)`` returns ``x`` itself)
    assert compare_outputs((x, x), (y, y.clone()), [], [])[0] == "identity"
    assert compare_outputs((), (), [x], [x + 1])[0] == "input_value"
    assert compare_outputs((), (), [x], [x.t()])[0] == "input_metadata"
    nan = torch.tensor([float("nan")])
    assert compare_outputs((nan,), (nan.clone(),), [], []) is None


def test_gradients_are_compared_with_an_unreached_leaf_as_eager_none() -> None:
    from .runner import _compare_grads, backward

    leaf = torch.arange(3.0).requires_grad_()
    grads = backward(leaf.clone() * 2, [leaf])
    assert grads[1] is None and grads[0][0].shape == (3,) and grads[0][0].count_nonzero() == 3
    wrong = ([grads[0][0] * 2], None)
    assert _compare_grads("b", 0, grads, wrong).kind == "grad"
    assert _compare_grads("b", 0, ([None], None), ([torch.zeros(3)], None)) is None
    assert _compare_grads("b", 0, ([None], None), ([torch.ones(3)], None)).kind == "grad"
    assert _compare_grads("b", 0, grads, (None, RuntimeError("x"))).kind == "backward_raised"
    assert backward(torch.ones(2), [leaf]) == (None, None)  # no output requires grad: no backward


def test_a_repro_script_compares_which_outputs_share_memory() -> None:
    """The standalone repro of an alias failure sees what the runner sees: outputs sharing memory with each
    other (not only with an input), so a shrunk alias repro still fails on its own."""
    from .program import REPRO_FOOTER

    namespace: dict = {"torch": torch, "__name__": "repro"}
    exec(REPRO_FOOTER.format(backend="inductor", dynamic="", extra="pass"), namespace)  # defines, runs nothing
    storages = namespace["storages"]
    x, y = torch.ones(2), torch.ones(1, 1)
    assert storages([y, y.view(1)], [x]) != storages([y, y.clone()], [x])
    assert storages([x[:1], y], [x]) == [("input", 0), ("output", 0)]
    assert storages([torch.ones(0), y], [x]) == [None, ("output", 0)]


def test_shrinker_minimises_a_failing_program() -> None:
    # A backend that computes sin wrongly: the shrunk program keeps the sin and little else.
    import dynajit.compiler
    from dynajit._dynamo import register_backend

    def wrong_sin(gm, example_inputs):
        for node in gm.graph.nodes:
            if node.target in (torch.sin, "sin"):
                node.target = torch.cos if node.op == "call_function" else "cos"
        gm.recompile()
        return gm.forward

    register_backend(wrong_sin, "fuzz_wrong_sin")
    assert "fuzz_wrong_sin" in dynajit.compiler.list_backends(exclude_tags=())
    for i in range(40):
        features = Features().without("errors", "data_branch", "graph_breaks", "autograd", "modules", "changed_facts")
        program = generate(f"w:{i}", features.without("half_dtypes", "contexts", "special_values"))
        failures = check(program, backends=("fuzz_wrong_sin",))
        if failures and failures[0].kind == "value":
            break
    else:
        pytest.skip("no generated program used sin in 40 tries")
    small, failure = shrink(program, failures[0], budget_seconds=60)
    assert failure.kind == "value"
    assert len(small.source()) < len(program.source())
    assert "sin" in small.source()
    assert "fuzz_wrong_sin" in repro_script(small, failure.backend, failure.kind)


def _leaving_state_behind(name: str, effect: Any) -> None:
    """Register backend ``name``: aot_eager, with ``effect()`` run when it compiles."""
    from dynajit._dynamo import lookup_backend, register_backend

    def backend(gm, example_inputs):
        effect()
        return lookup_backend("aot_eager")(gm, example_inputs)

    register_backend(backend, name)


@pytest.mark.parametrize(
    ("name", "effect", "part"),
    [
        ("fuzz_draws", lambda: torch.randn(1), "the global generator"),
        ("fuzz_sets_dtype", lambda: torch.set_default_dtype(torch.float64), "default dtype"),
    ],
)
def test_a_compile_that_changes_the_callers_process_state_is_a_failure(name, effect, part) -> None:
    # Capture puts back what a backend's compile changes; the fuzzer checks that nothing does, so this backend's
    # effect shows only with that defence patched out.
    import dynajit.capture._convert  # noqa: F401  (first: capture's private modules import each other in its order)
    from dynajit.capture._symbolic import output

    _leaving_state_behind(name, effect)
    features = Features().without("errors", "data_branch", "graph_breaks", "modules", "changed_facts")
    with mock.patch.object(output, "preserved_process_state", contextlib.nullcontext):
        try:
            failures = check(generate("state:0", features), backends=(name,))
        finally:
            torch.set_default_dtype(torch.float32)
    assert failures and failures[0].kind == "process_state", failures
    assert part in failures[0].detail


@pytest.mark.slow
def test_ci_budget_agrees_with_eager() -> None:
    features = Features().without(*CI_EXCLUDED)
    report = fuzz(CI_SEED, count=CI_COUNT, features=features, shrink_seconds=120, log=lambda text: None)
    assert report.programs == CI_COUNT
    messages = [f"{cls.key} in {cls.seeds}\n{cls.repro}" for cls in report.classes.values()]
    assert not report.classes, "\n\n".join(messages)


def test_failure_class_ignores_numbers_and_names() -> None:
    a = Failure("inductor", 0, "raised", "RuntimeError", "RuntimeError: bad size 3 for v12")
    b = Failure("inductor", 2, "raised", "RuntimeError", "RuntimeError: bad size 7 for v3")
    assert a.failure_class == b.failure_class


def test_jobs_run_side_by_side_on_their_own_seeds(capsys) -> None:
    from .cli import _without_options, main

    assert _without_options(["--seed", "7", "--minutes=3", "--jobs", "2", "--ci"], {"--seed", "--minutes"}) == [
        "--jobs",
        "2",
        "--ci",
    ]
    code = main(["--seed", "jobs", "--count", "2", "--jobs", "2", "--shrink-seconds", "0", "--max-statements", "3"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "[job 0] fuzz seed jobs-0" in printed and "[job 1] fuzz seed jobs-1" in printed
    assert "2 jobs: 2 programs, 0 failure classes" in printed


def test_a_job_goes_on_in_a_new_process_after_each_chunk(capsys) -> None:
    # (b38) A process never unloads its kernel libraries: after ~3,300 programs every load failed
    # (vm.max_map_count). Each job's worker is replaced every --chunk programs, going on from its last index.
    from .cli import main

    argv = ["--seed", "chunks", "--count", "6", "--jobs", "2", "--chunk", "2", "--shrink-seconds", "0"]
    code = main([*argv, "--max-statements", "3"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert printed.count("[job 0] fuzz seed chunks-0") == 2 and printed.count("[job 1] fuzz seed chunks-1") == 2
    assert "[job 0] 2 programs in" in printed and "[job 0] 1 programs in" in printed
    assert "2 jobs: 6 programs, 0 failure classes" in printed


def test_a_gradient_difference_within_eagers_own_float32_error_is_rounding():
    exact = torch.tensor([1e-5, 2.0], dtype=torch.float64)
    eager = torch.tensor([9e-4, 2.0])  # eager's own float32 error on the first element: ~9e-4
    noisy = torch.tensor([-1.5e-3, 2.0])  # 2.4e-3 from eager: over the tolerance, within 4x eager's error
    wrong = torch.tensor([9e-4, 2.1])  # off where eager is exact
    assert _compare_grads("inductor", 0, ([eager], None), ([noisy], None), lambda: [exact]) is None
    assert _compare_grads("inductor", 0, ([eager], None), ([noisy], None)) is not None  # no reference: stands
    failure = _compare_grads("inductor", 0, ([eager], None), ([wrong], None), lambda: [exact])
    assert failure is not None and failure.kind == "grad"


def test_an_output_difference_within_eagers_own_float32_error_is_rounding():
    # (b35-1:783) A training BatchNorm of an input copied to 1.5: its output is a mean's last-ulp error over
    # sqrt(eps), summed: 0.00245 in eager's float32, 0.0 compiled and in float64.
    from .runner import _within_rounding

    assert _within_rounding([0.00245], [0.0], lambda: [0.0])
    assert not _within_rounding([0.00245], [0.0], lambda: None)  # no reference: the difference stands
    assert not _within_rounding([2.0], [2.1], lambda: [2.0])  # off where eager is exact
    exact = torch.tensor([1e-5, 2.0], dtype=torch.float64)
    eager, noisy, wrong = torch.tensor([9e-4, 2.0]), torch.tensor([-1.5e-3, 2.0]), torch.tensor([9e-4, 2.1])
    assert _within_rounding([eager, 3], [noisy, 3], lambda: [exact, 3])
    assert not _within_rounding([eager, 3], [noisy, 4], lambda: [exact, 3])  # integers are exact
    assert not _within_rounding([eager], [wrong], lambda: [exact])


def test_a_gradient_that_cancels_large_terms_is_judged_by_eagers_redrawn_noise():
    # (a247:900) A Conv2d whose first channel's weight is -0.0075, then a LayerNorm over rows of nearly equal
    # values: the bias's gradient is exactly 0, a sum of terms near 100. Eager's float32 gave -0.00029 (by
    # luck near float64's 3e-12), the compiled one 0.0019: both noise. Eager on nudged inputs draws it again.
    from .runner import _within_rounding

    exact, eager, nudged = torch.tensor([3e-12], dtype=torch.float64), torch.tensor([-2.9e-4]), torch.tensor([1.2e-3])
    assert not _within_rounding([eager], [torch.tensor([1.9e-3])], lambda: [exact])
    assert _within_rounding([eager], [torch.tensor([1.9e-3])], lambda: [exact], lambda: [nudged])
    assert not _within_rounding([eager], [torch.tensor([0.5])], lambda: [exact], lambda: [nudged])
    program = Program(
        seed="a247:900",
        args=[ArgSpec("x1", "tensor", dims=["s1", 1, "s0", 3], layout="transposed")],
        calls=[{"s0": 1, "s1": 0, "s2": 0}, {"s0": 4, "s1": 2, "s2": 0}],
        body=[Stmt(["v1 = MODS[0](x1)", "v3 = MODS[1](v1)"])],
    )
    program.modules, program.returns = ["torch.nn.Conv2d(1, 3, 1)", "torch.nn.LayerNorm(3)"], ["v3"]
    program.return_style = "single"
    assert check(program, backends=("inductor",)) == []


def test_an_ill_conditioned_tensors_noise_is_its_worst_element():
    # (a38-1:901) A LayerNorm over two equal values, normalized at zero: the input's gradient is 0 exactly and
    # float32 noise of 1e12-sized terms in eager (3.4e7 on two elements, 0 on the others by cancellation).
    from .runner import _within_rounding

    exact = torch.tensor([0.0, 0.0, -0.0625, -0.015625], dtype=torch.float64)
    eager = torch.tensor([0.0, 33554432.0, 33554432.0, 0.0])
    assert _within_rounding([eager], [torch.tensor([0.0, 67108864.0, 0.0, -8388608.0])], lambda: [exact])
    assert not _within_rounding([eager], [torch.tensor([0.0, 3e8, 0.0, 0.0])], lambda: [exact])
    # Eager within the tolerance everywhere: each element keeps its own floor, however large its neighbour.
    exact, eager = torch.tensor([1e12, 1.0], dtype=torch.float64), torch.tensor([1e12 + 65536.0, 1.0])
    assert not _within_rounding([eager], [torch.tensor([1e12, 11.0])], lambda: [exact])
    # An overflow in eager floors nothing but itself.
    exact, eager = torch.tensor([1e39, 1.0], dtype=torch.float64), torch.tensor([float("inf"), 1.0])
    assert not _within_rounding([eager], [torch.tensor([float("inf"), 5.0])], lambda: [exact])


def test_a_nan_of_eagers_own_rounding_is_measured_against_float64():
    # (e39-0:833) linear(layer_norm(v), ones) is 0 up to rounding: -1.2e-7 in eager, so `masked_fill(x < 0, -inf)`
    # masks every element and the softmax is NaN, where float64 (and the compiled program) give 0.5 each.
    from .runner import _within_rounding

    exact, eager = torch.tensor([0.5, 0.5], dtype=torch.float64), torch.tensor([float("nan")] * 2)
    assert _within_rounding([eager], [torch.tensor([0.5, 0.5])], lambda: [exact])
    assert _within_rounding([eager], [torch.tensor([float("nan")] * 2)], lambda: [exact])
    assert not _within_rounding([eager], [torch.tensor([0.25, 0.75])], lambda: [exact])
    # Compiled NaN where eager is finite still differs.
    assert not _within_rounding([torch.tensor([0.5, 0.5])], [torch.tensor([float("nan")] * 2)], lambda: [exact])


def test_an_infinity_whose_sign_eagers_rounding_picks_is_not_compared():
    # (a40-0:422) `layer_norm(x) / 0` over one element: the weight's gradient is inf times the normalized value,
    # 0 up to rounding: eager gives -inf in float32 and +inf in float64, the compiled program 0 * inf = NaN.
    from .runner import _within_rounding

    eager, exact = torch.tensor([-float("inf"), 2.0]), torch.tensor([float("inf"), 2.0], dtype=torch.float64)
    for compiled in ([float("nan"), 2.0], [float("inf"), 2.0], [-float("inf"), 2.0]):
        assert _within_rounding([eager], [torch.tensor(compiled)], lambda: [exact])
    assert not _within_rounding([eager], [torch.tensor([5.0, 2.0])], lambda: [exact])  # a finite value is not
    assert not _within_rounding([eager], [torch.tensor([float("nan"), 3.0])], lambda: [exact])
    # Where both runs give the same infinity, it is eager's answer.
    same = torch.tensor([float("inf"), 2.0], dtype=torch.float64)
    assert not _within_rounding(
        [torch.tensor([float("inf"), 2.0])], [torch.tensor([float("nan"), 2.0])], lambda: [same]
    )


def test_no_mask_of_the_sign_of_a_value_that_is_zero_up_to_rounding():
    # (e39-0:833) `x.masked_fill(x < 0, -inf)` of linear(layer_norm(v), ones), 0 up to rounding: +1.2e-7 in eager,
    # -1.2e-7 compiled, so one softmax is 0.5 each and the other NaN.
    from .expressions import sign_conditioned

    zero_up_to_rounding = torch.nn.functional.layer_norm(torch.tensor([0.3, -1.2, 2.0]), (3,)).sum(0, keepdim=True)
    assert not sign_conditioned([torch.tensor([1.0, -2.0]), zero_up_to_rounding])
    assert sign_conditioned([torch.tensor([1.0, -2.0]), torch.tensor([3, 0])])


def test_no_cast_to_bool_of_a_value_that_is_zero_up_to_rounding():
    # (a192:52) `torch.add(b, v.to(b.dtype), out=b)` into a bool tensor, v the mean of a LayerNorm's outputs: 0 in
    # eager, 1e-8 compiled, so one call left b False and the other True. Such a float is never cast to bool.
    from .expressions import sign_conditioned

    norm = torch.nn.functional.layer_norm(torch.tensor([[0.3, -1.2, 2.0]]), (3,))
    assert not sign_conditioned([norm.mean((0, -1))])
    assert sign_conditioned([norm.mean((0, -1)) + 0.5, torch.tensor([0, 1])])


def test_no_quotient_by_a_value_that_is_zero_up_to_rounding():
    # The sum of a LayerNorm's outputs is 0 up to rounding: `p / p` of it is 1 or nan at rounding's whim.
    from .expressions import near_zero

    assert near_zero(torch.nn.functional.layer_norm(torch.tensor([0.3, -1.2]), (2,)).sum())
    assert not near_zero(torch.tensor([0.5, -2.0])) and not near_zero(torch.tensor([1, 0]))


def test_no_comparison_of_values_equal_up_to_rounding():
    # (a76-0:188) `x < torch.nan_to_num(x.sqrt()) ** 2`: eager's float32 sqrt is a last ulp off on AVX-512 where
    # the kernels' is exact, and the comparison turns the ulp into a different bool.
    from .expressions import near_equal

    x = torch.rand(1000) * 10
    assert near_equal(x, torch.nan_to_num(x.sqrt()) ** 2) and near_equal(torch.tensor([2.0, 3.5]), "2")
    assert not near_equal(x, x + 1) and not near_equal(torch.tensor([2, 3]), "2")  # ints compare exactly
    assert not near_equal(x, "x.shape[0]") and not near_equal(x, torch.rand(3))  # (not a value here)


def test_no_data_condition_that_rounding_decides_on_any_call():
    # (a78-1:198) `if bn(x).sum() > 0` with the BatchNorm in eval mode on call 0 and in training mode on call 3,
    # where its output's sum is 0 up to rounding (+9.5e-7 in eager, -9.5e-7 compiled): the branches differ.
    from .generator import data_conditions

    x = torch.randn(4, 3, 2, 2, generator=torch.Generator().manual_seed(0)) + 2
    trained = torch.nn.functional.batch_norm(x, None, None, training=True)
    assert "v.sum() > 0" in data_conditions("v", [x, x * 2])
    assert "v.sum() > 0" not in data_conditions("v", [x, trained])
    assert "v.sum() > 0" not in data_conditions("v", [trained, x])
    assert "v.sum() > 0" in data_conditions("v", [torch.tensor([1, -1]), torch.tensor([3])])  # ints are exact


def test_no_gelu_of_arguments_holding_infinities():
    # (a79-1:1899) eager's float32 GELU of +inf: NaN for two elements or more, inf for one (and in float64).
    from .expressions import unary_ops

    assert "nn.functional.gelu" in unary_ops(floating=True, specials=False)
    assert "nn.functional.gelu" not in unary_ops(floating=True, specials=True)


def test_no_integer_conversion_of_values_within_rounding_of_an_integer():
    # (a129:2556) a layer norm of two elements is 1 - 4e-8 in eager and 1.0 compiled: `.long()` gave 0 and 1.
    from .expressions import near_nonzero_integer

    assert near_nonzero_integer(torch.tensor([0.3, 1 - 4e-8])) and near_nonzero_integer(torch.tensor([-3.0]))
    assert not near_nonzero_integer(torch.tensor([1e-9, -0.4, 2.5, 7.01]))
    assert not near_nonzero_integer(torch.tensor([1, 2]))  # ints are exact


def test_attention_is_offered_only_for_a_value_of_three_dims_or_more_on_every_call():
    # (a131:523) a name bound to a 3-d tensor on one call and a 0-d one on another: reading its head dim raised.
    generate("a131:523", Features())


def test_no_training_batch_norm_over_a_channel_of_equal_values():
    # (a31-1:704) `x[:, :, ::2].copy_(12)` and sums of it make every element 120: a training BatchNorm's output
    # is then a mean's last-ulp error over sqrt(eps), -0.0034 in eager and 0.0 compiled.
    from .generator import _batch_statistics_conditioned

    assert not _batch_statistics_conditioned([torch.randn(4, 3, 2), torch.full((4, 3, 2), 120.0)], 1)
    one_flat_channel = torch.randn(2, 3, 5, 5)
    one_flat_channel[:, 1] = 7.0
    assert not _batch_statistics_conditioned([one_flat_channel], 1)
    assert _batch_statistics_conditioned([torch.randn(4, 3, 2), torch.randn(2, 3, 5, 5)], 1)


def test_no_training_batch_norm_of_a_convolution_with_a_bias():
    # (a31-0:2645) A training-mode BatchNorm subtracts each channel's mean, and with it the bias of the convolution
    # before it: that bias's gradient is zero up to rounding (1e-13 in float64, 1e-3 in eager's float32).
    import re

    from .generator import Generator

    pairs = 0
    for k in range(40):
        generator = Generator(f"bn-after-conv:{k}", Features(layouts=True))
        generator._make_signature()
        generator.spaces = generator.namespaces()
        for _ in range(8):
            generator.module_call()
        modules = generator.program.modules
        made = re.findall(r"(\w+) = MODS\[(\d+)\]\((\w+)\)", generator.program.source())
        producer = {target: modules[int(j)] for target, j, _ in made}
        for _, j, operand in made:
            before = producer.get(operand, "")
            if "BatchNorm" in modules[int(j)] and before.startswith("torch.nn.Conv") and "bias=False" not in before:
                pairs += 1
                assert modules[int(j)].endswith(".eval()"), generator.program.source()
    assert pairs, "no BatchNorm of a convolution was generated: the check checked nothing"


def test_a_repro_script_can_compare_state_snapshots() -> None:
    # The standalone repro compares a State argument's snapshot with torch.testing.assert_close: its leaves
    # must be numbers and tensors (a box's origin was once labelled with a string, which assert_close refuses).
    from .program import STATE_SOURCE

    namespace: dict = {"torch": torch}
    exec(STATE_SOURCE, namespace)
    eager, compiled = namespace["State"](torch.ones(2)), namespace["State"](torch.ones(2))
    torch.testing.assert_close(compiled.snapshot(), eager.snapshot())
    compiled.boxes.reverse()
    with pytest.raises(AssertionError):
        torch.testing.assert_close(compiled.snapshot(), eager.snapshot())


def _facts_program() -> Program:
    body = [
        Stmt(["v1 = x0 * K"]),
        Stmt(clauses=[("if FACTS.flag:", [Stmt(["v2 = v1 + 1"])]), ("else:", [Stmt(["v2 = v1 - 1"])])]),
        Stmt(['v3 = v2 * getattr(FACTS, "extra", 1)']),
        Stmt(clauses=[('if "a" in FACTS.table:', [Stmt(["v4 = v3 * 2"])]), ("else:", [Stmt(["v4 = v3"])])]),
        Stmt(["v5 = v4 * len(FACTS.table) + FACTS.scale", "v5 = MODS[0](v5)"]),
        Stmt(["v6 = v5 * sum(p.sum() for p in NET.parameters()) + NET[1].weight.sum()"]),
    ]
    fact = {"K": 1, "flag": True, "scale": 0.5, "keys": ("a",), "extra": None, "training": True, "tied": True}
    changes = [
        {},
        {"K": 2, "extra_param": True},
        {"flag": False, "extra": 3, "keys": ("b", "c"), "training": False},
        {"tied": False},  # alone: untied after the compiles that saw them tied
    ]
    facts = []
    for change in changes:
        fact = {**fact, **change}
        facts.append(fact)
    program = Program(seed="facts", args=[ArgSpec("x0", "tensor", dims=[2, 3])], calls=[{"s0": 2}] * 4, body=body)
    program.modules, program.facts, program.returns = ["torch.nn.BatchNorm1d(3)"], facts, ["v6"]
    return program


def test_every_changed_fact_is_guarded() -> None:
    # Each call changes facts the trace read (a rebound global, an attribute, a dict's keys, an attribute
    # added, the module's train mode, a parameter registered, tied weights untied): an entry answering for the
    # old facts fails the comparison with eager.
    program = _facts_program()
    source = program.source()
    namespace: dict = {}
    exec(source, namespace)
    answers = {str(namespace["fn"](*namespace["make_args"](call, i))) for i, call in enumerate(namespace["CALLS"])}
    assert len(answers) == 4  # every change changes eager's answer
    assert check(program) == []


def test_each_call_is_made_in_its_ambient_mode() -> None:
    # The modes reach the program (the answers differ by mode) and an entry reused across them is caught: with
    # GLOBAL_STATE blind to inference mode, the fourth call reused the first's graph.
    body = [
        Stmt(
            clauses=[
                ("if torch.is_inference_mode_enabled():", [Stmt(["v1 = x0 + 1"])]),
                ("else:", [Stmt(["v1 = x0 - 1"])]),
            ]
        ),
        Stmt(["v2 = v1 * 1"]),
    ]
    program = Program(
        seed="modes", args=[ArgSpec("x0", "tensor", dims=[2, 3], grad=True)], calls=[{"s0": 2}] * 4, body=body
    )
    program.modes, program.returns = ["inference", "grad", "no_grad", "inference"], ["v2", "x0[0]"]
    namespace: dict = {}
    exec(program.source(), namespace)
    answers = []
    for call in range(4):
        with namespace["ambient"](call):
            args = namespace["make_args"](namespace["CALLS"][call], call)
            out = namespace["fn"](*args)
        answers.append((round(float((out[0] - args[0]).mean())), out[0].requires_grad, out[0].is_inference()))
    assert len(set(answers)) == 3 and answers[0] == answers[3]
    assert check(program) == []
    state = compare_outputs((torch.ones(1, requires_grad=True),), (torch.ones(1),), [], [])
    assert state is not None and state[0] == "autograd"


@pytest.mark.parametrize("matmuls", [True, False])
def test_a_forced_layout_reaches_the_channels_last_pass_and_is_undone_after(matmuls, caplog) -> None:
    # Timed on a 2-core machine, channels-last almost never pays on the fuzzer's tiny images: forced, the pass
    # and its pointwise convolutions as matrix products are fuzzed, and the next program times as usual.
    from dynajit.inductor_lite import _layout

    timings = (_layout._conv_seconds, _layout._seconds, _layout._peak_bytes)
    program = Program(
        seed="layout",
        args=[ArgSpec("x0", "tensor", dims=["s0", 3, 4, 4])],
        calls=[{"s0": 2}, {"s0": 2}],
        body=[Stmt(["v1 = MODS[0](x0)"]), Stmt(["v2 = MODS[1](v1.relu())"])],
    )
    program.modules = ["torch.nn.Conv2d(3, 8, 3, padding=1)", "torch.nn.Conv2d(8, 5, 1)"]
    program.module_grads, program.returns = False, ["v2"]
    program.layout = {"channels_last": True, "matmuls": matmuls}
    with caplog.at_level(logging.INFO, logger="dynajit.inductor_lite"):
        assert check(program) == []
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("inductor-lite: convolutions run channels-last") for m in messages)
    assert ("inductor-lite: 1 pointwise convolutions run as matrix products" in messages) is matmuls
    assert (_layout._conv_seconds, _layout._seconds, _layout._peak_bytes) == timings


def test_views_include_one_whose_elements_aten_reads_negated():
    # (a view with the negative bit, ``z.conj().imag``: inductor-lite's kernels read its memory unnegated)
    sources = [generate(f"neg-{i}").source() for i in range(150)]
    assert any(".conj().imag" in source for source in sources)


def test_no_integer_conversion_of_a_value_near_an_integer_on_a_later_call():
    # (a138:800) `cos(x).long()` was offered on the strength of the first call, whose tensor was empty; on the third,
    # cos(2.5e-4) is 1.0 in eager and 1 - 6e-8 compiled (correctly rounded), and the conversion made them 1 and 0.
    program = generate("a138:800", Features())
    assert check(program, backends=("inductor",)) == []


def test_a_list_that_becomes_two_names_of_one_is_fuzzed():
    # Traced with st.more and st.counts apart, the later calls pass one list under both names: a write through
    # one name is read through the other (the answer differs then, so the case tests something), and a trace
    # that kept them apart without a guard answered with the old lengths.
    body = [Stmt(["st.more.append(3)", "st.a = st.a * len(st.counts)"]), Stmt(["v1 = st.a + x0"])]
    program = Program(
        seed="shared",
        args=[ArgSpec("x0", "tensor", dims=[2]), ArgSpec("st", "state", dims=[2], shared=[False, True, True])],
        calls=[{"s0": 2}] * 3,
        body=body,
    )
    program.returns = ["v1"]
    namespace: dict = {}
    exec(program.source(), namespace)
    lengths = []
    for i, call in enumerate(namespace["CALLS"]):
        args = namespace["make_args"](call, i)
        namespace["fn"](*args)
        lengths.append(len(args[1].counts))
    assert lengths == [2, 3, 3]
    assert check(program) == []


def test_shared_objects_programs_trace_apart_and_call_shared():
    features = Features().only("objects", "shared_objects", "pointwise")
    patterns = [arg.shared for i in range(200) for arg in generate(f"shared:{i}", features).args if arg.kind == "state"]
    assert patterns and all(len(set(p)) == 2 for p in patterns)  # every program meets both cases
    assert sum(not p[0] for p in patterns) > len(patterns) / 2  # mostly traced apart first


def test_no_step_function_of_a_value_within_rounding_of_its_jump():
    from .expressions import near_step

    assert near_step(torch.tensor([0.3, 1 + 6e-8]), 0.0) and near_step(torch.tensor([-1e-9]), 0.0)
    assert near_step(torch.tensor([2.5 - 1e-7]), 0.5) and not near_step(torch.tensor([2.5 - 1e-7]), 0.0)
    assert not near_step(torch.tensor([0.3, 1.7, -2.4]), 0.0)
    assert not near_step(torch.tensor([1, 2]), 0.0)  # ints are exact


def _loop_program(
    seed: str, body: list[Stmt], eager: collections.abc.Callable[[torch.Tensor], torch.Tensor]
) -> Program:
    """A program of ``body`` over one tensor ``x0`` returning ``v1``, checked first to give ``eager(x0)`` eagerly."""
    program = Program(seed=seed, args=[ArgSpec("x0", "tensor", dims=[2])], calls=[{"s0": 2}] * 2, body=body)
    program.returns, program.return_style = ["v1"], "single"
    namespace: dict = {}
    exec(program.source(), namespace)
    x = namespace["make_args"](namespace["CALLS"][0], 0)[0]
    torch.testing.assert_close(namespace["fn"](x.clone()), eager(x))
    return program


def test_a_loop_that_writes_the_item_it_reaches_next_is_fuzzed():
    # Each step of a loop over a sequence reads the item as the body left it: a trace that read every item first
    # answered with the old last item.
    loop = ("for i, v in enumerate(c1):", [Stmt(["v1 = v1 + v", "c1.data[-1] = v * 3"])])
    body = [Stmt(["v1 = x0 * 1", "c1 = Window([x0, x0 + 1, x0])"], clauses=[loop])]
    program = _loop_program("ahead", body, lambda x: x * 6 + 4)  # not x * 4 + 1, the items read first
    assert check(program) == []


def test_loops_writing_ahead_cover_dicts_sequences_and_deques():
    features = Features().only("loops", "pointwise")
    sources = [generate(f"ahead:{i}", features).source() for i in range(300)]
    made = [
        kind
        for kind in (".values():", ".items():", "= Window([", "collections.deque([", "except RuntimeError:")
        if any(kind in s for s in sources)
    ]
    assert len(made) == 5, made


def test_loops_over_live_iterators_are_fuzzed():
    # reversed() of a list the body pops from: Python's iterator reads the list at each step and yields x three
    # times (x * 4 with the start); a snapshot of the items taken at the loop's start yields x, x + 1, x.
    loop = Stmt(clauses=[("for v in reversed(c1):", [Stmt(["v1 = v1 + v", 'print(end="")', "c1.pop(0)"])])])
    body = [Stmt(["v1 = x0 * 1", "c1 = [x0, x0 + 1, x0]"], clauses=loop.clauses)]
    program = _loop_program("live", body, lambda x: x * 4)
    assert check(program) == []
    features = Features().only("loops", "pointwise", "graph_breaks")
    sources = [generate(f"live:{i}", features).source() for i in range(300)]
    headers = ("in reversed(c", "in zip(c", "in enumerate(c", "= iter(c")
    made = [h for h in headers if any(h in s for s in sources)]
    assert len(made) == 4, made
    assert any(".pop(0)" in s and "reversed(" in s and "print(end" in s for s in sources)


def test_lists_shrunk_below_a_live_iterator_are_fuzzed():
    # a180-0:12: zip's second list iterator, past the end of the list the body cleared, was rebuilt at a break by
    # stepping a new iterator that far, which raised StopIteration. An iterator past the end is not exhausted:
    # the list growing past its position again gives it more items: four steps where a snapshot gives three.
    step = ["v1 = v1 + v", "if len(c1) > 2: del c1[:2]", 'print(end="")']
    step.append("c1.extend([v, v * 2]) if len(c1) < 5 else None")
    loop = Stmt(clauses=[("for v in c1:", [Stmt(step)])])
    body = [Stmt(["v1 = x0 * 1", "c1 = [x0, x0 + 1, x0, x0 + 1]"], clauses=loop.clauses)]
    program = _loop_program("shrunk", body, lambda x: x * 6 + 4)
    assert check(program) == []
    features = Features().only("loops", "pointwise", "graph_breaks")
    sources = [generate(f"shrunk:{i}", features).source() for i in range(300)]
    assert any("del c" in s and "print(end" in s for s in sources)
    assert any("zip(c" in s and ".clear()" in s for s in sources)


def test_autograd_functions_reading_changed_facts_are_fuzzed():
    # ScaledByK's forward and backward read the global K, which the third call changes: an AOT backend kept the
    # K it traced with, in values and in gradients, until their globals were guarded.
    facts = {"K": 2, "flag": True, "scale": 0.5, "keys": (), "extra": None, "training": None}
    body = [Stmt(["v1 = ScaledByK.apply(x0 * 1)", "v2 = ScaledByFacts.apply(v1)"])]
    calls = [{"s0": 2}] * 3
    program = Program(seed="facts", args=[ArgSpec("x0", "tensor", dims=[2], grad=True)], calls=calls, body=body)
    program.facts = [facts, facts, {**facts, "K": 3, "scale": 2.0}]
    program.returns, program.return_style = ["v2"], "single"
    assert check(program, backends=("aot_eager",)) == []
    features = Features().only("changed_facts", "pointwise")
    sources = [generate(f"facts:{i}", features).source() for i in range(200)]
    assert any("ScaledByK.apply(" in s for s in sources) and any("ScaledByFacts.apply(" in s for s in sources)


@pytest.mark.parametrize(
    ("layout", "lines", "returned"),
    [
        # The piece was rebuilt at the storage offset of the first call's input: other rows of a later one.
        ("offset", ["x0.mul_(2)", "v1 = x0.unbind(0)[1]"], "v1"),
        # A select of a piece's layout was given the piece's kind: writing its view raised where eager writes it.
        ("piece", ["v0 = x0.view(-1)", 'print(end="")', "v1 = v0.mul_(2)"], "v1"),
    ],
)
def test_inputs_that_start_inside_their_storage_or_are_pieces_are_fuzzed(layout, lines, returned):
    program = Program(
        seed=layout, args=[ArgSpec("x0", "tensor", dims=[3, 2], layout=layout, grad=True)], calls=[{"s0": 2}] * 3
    )
    program.body, program.returns, program.return_style = [Stmt(lines)], [returned], "single"
    assert check(program, backends=("aot_eager",)) == []
    features = Features().only("noncontiguous_inputs", "pointwise")
    sources = [generate(f"layouts:{i}", features).source() for i in range(300)]
    assert any(".narrow(0, call % 3, " in s for s in sources) and any("= piece(" in s for s in sources)


def test_random_draws_are_fuzzed_and_drawn_alike_on_each_side_of_a_break():
    body = [
        Stmt(["v1 = x0 + torch.rand(x0.shape)", 'print(end="")', "v2 = torch.where(torch.rand(x0.shape) < 0.5, v1, 0)"])
    ]
    program = Program(seed="random", args=[ArgSpec("x0", "tensor", dims=[2, 3])], calls=[{"s0": 2}] * 2, body=body)
    program.returns, program.return_style = ["v2"], "single"
    assert check(program, backends=("aot_eager", "inductor")) == []
    drawn = re.compile(r"torch\.(rand|randn)\(\w+\.shape\)|randint\(0, 3|randperm\(")
    sources = [generate(f"random:{i}", Features().only("random", "pointwise")).source() for i in range(50)]
    assert sum(bool(drawn.search(s)) for s in sources) > 10


def test_lists_and_sets_grown_in_place_are_fuzzed():
    # `+=` on a list of constants made a copy: the caller's list and the aliases made before kept their length.
    lines = ["c1 = [1, 2]", "c2 = c1", "l1 = [x0, x0 + 1]", "l2 = l1", 'print(end="")']
    lines += ["c1 += [len(l1)]", "c1 *= 2", "l1 *= 2", "s1 = {1, 2}", "s2 = s1", "s1 ^= {2, 3, 4}"]
    lines += ["v1 = torch.stack(l2).sum(0) * len(c2) + sum(s2)"]
    program = Program(seed="grown", args=[ArgSpec("x0", "tensor", dims=[2])], calls=[{"s0": 2}] * 2, body=[])
    program.body = [Stmt(lines)]
    program.returns, program.return_style = ["v1"], "single"
    assert check(program) == []
    sources = [generate(f"grown:{i}", Features().only("containers", "pointwise")).source() for i in range(200)]
    assert all(any(op in s for s in sources) for op in (" *= 2", " += [len(", " += range(2)", " ^= {1, 7}"))


def test_a_tuple_item_extended_in_a_try_block_is_fuzzed():
    # `pair[0] += [...]` extends the list, then raises TypeError: a graph break at the try body's last
    # instruction, whose continuation is outside the block. The handler's local `kp1` was never stored.
    clauses = [("try:", [Stmt(["t1[0] += [x0]"])]), ("except TypeError:", [Stmt(["v1 = kp1 + len(t1[0])"])])]
    body = [Stmt(["kp1 = x0 * 2", "t1 = ([x0], [1])"], clauses=clauses)]
    program = Program(seed="tuple", args=[ArgSpec("x0", "tensor", dims=[2])], calls=[{"s0": 2}] * 2, body=body)
    program.returns, program.return_style = ["v1"], "single"
    assert check(program) == []
    sources = [generate(f"tuple:{i}", Features().only("containers", "pointwise")).source() for i in range(200)]
    assert any("[0] += [" in s and "except TypeError:" in s for s in sources)


def test_casts_to_small_integers_are_fuzzed():
    # A float out of int8's range converts through int32 in eager, keeping the low bits: 1000.0 is -24 as int8. The
    # compiled cast was direct, undefined in C++, and g++ folded nan_to_num's known 1000.0 to 127.
    lines = ["v1 = x0 / 0", "v2 = v1.nan_to_num(0.0, 1e3, -1e3)"]
    lines += ["v3 = v2.to(torch.int8)", "v4 = (v2 - 7).to(torch.uint8)", "v5 = (v3 * 3).to(torch.int16) + v4"]
    program = Program(seed="small", args=[ArgSpec("x0", "tensor", dims=[40])], calls=[{}], body=[Stmt(lines)])
    program.returns, program.return_style = ["v3", "v5"], "tuple"
    assert check(program, backends=("inductor",)) == []
    sources = [generate(f"small:{i}", Features().only("pointwise", "dtypes")).source() for i in range(500)]
    assert all(any(f".to(torch.{d})" in s for s in sources) for d in ("int8", "uint8", "int16", "int32"))


def test_a_float64_result_of_float32_rounding_is_judged_against_eager_in_float64():
    # a177:182: rows of x ** 2 plus one large sum cancel in the LayerNorm's variance; its float32 result, promoted
    # to float64, is off float64's twin by 3e-4 in eager and 2.5e-4 compiled, far above float64's own tolerance.
    lines = ["v5 = x0 ** 2", "v6 = v5 + sum(t.sum() for t in v5.unbind(0))"]
    lines += ["v7 = torch.nn.functional.layer_norm(v6, v6.shape[-1:])", "v9 = v7.to(torch.float64)"]
    program = Program(seed="f64", args=[ArgSpec("x0", "tensor", dims=[3, 2, 1, 3], grad=True)], calls=[{}], body=[])
    program.body = [Stmt(lines)]
    program.returns, program.return_style = ["v9"], "single"
    assert check(program, backends=("inductor",)) == []


def test_a_loop_that_swaps_a_dict_key_at_the_same_size_is_fuzzed():
    # At "a" the body swaps "a" for "z": Python yields "b" and "c", then raises at "z"; after a break, a resumed
    # loop that read the dict again by position skipped "b" and never raised.
    swap = "c1.update(z=c1.pop('a')) if k == 'a' and 'z' not in c1 else None"
    loop = Stmt(clauses=[("for k in c1:", [Stmt(["v1 = v1 + c1[k]", 'print(end="")', swap])])])
    caught = [("try:", [loop]), ("except RuntimeError:", [Stmt(["v1 = v1 * 2 + 1"])])]
    body = [Stmt(["v1 = x0 * 1", "c1 = {'a': x0, 'b': x0 + 1, 'c': x0}"], clauses=caught)]
    program = _loop_program("rekey", body, lambda x: (x * 4 + 1) * 2 + 1)
    assert check(program) == []
    features = Features().only("loops", "pointwise", "graph_breaks")
    swaps = [s for i in range(300) if ".update(z=" in (s := generate(f"rekey:{i}", features).source())]
    assert any(".pop('a'))" in s for s in swaps)  # Python raises at "z"
    assert any("print(end" in s or "graph_break()" in s for s in swaps)


def test_a_run_names_the_committed_product_it_ran_against(tmp_path) -> None:
    import subprocess

    from . import ledger

    tmp_path = tmp_path.resolve()  # as git names the checkout

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(tmp_path), *args], capture_output=True, text=True, check=True).stdout

    source = tmp_path / "packages" / "capture" / "src" / "dynajit" / "capture"
    source.mkdir(parents=True)
    (source / "__init__.py").write_text("X = 1\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "t.py").write_text("")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    assert ledger.product({source}) == (git("rev-parse", "HEAD:packages").strip(), str(tmp_path))
    (tmp_path / "tests" / "t.py").write_text("changed = True\n")  # a test is not the product
    assert ledger.product({source})[0] == git("rev-parse", "HEAD:packages").strip()
    (source / "__init__.py").write_text("X = 2\n")
    assert ledger.product({source}) == (None, f"{tmp_path / 'packages'} has uncommitted changes")
    assert ledger.product({tmp_path / "tests"})[0] is None


def test_the_ledger_counts_each_program_once_per_product(tmp_path, monkeypatch) -> None:
    from . import ledger
    from .cli import main

    path = tmp_path / "ledger.jsonl"
    monkeypatch.setattr(ledger, "product", lambda folders=None: ("a" * 40, "checkout"))
    assert main(["--seed", "led", "--count", "2", "--ledger", str(path), "--shrink-seconds", "0"]) == 0
    ledger.record(path, "led", 1, 3, [], log=lambda text: None)  # programs led:1 and led:2 again, and led:3
    monkeypatch.setattr(ledger, "product", lambda folders=None: ("b" * 40, "checkout"))
    ledger.record(path, "led", 0, 5, ["exception RuntimeError"], log=lambda text: None)
    totals = ledger.tally(path)
    assert [(t.programs, t.runs, t.failure_classes) for t in totals.values()] == [
        (4, 2, set()),
        (5, 1, {"exception RuntimeError"}),
    ]
    assert ledger.describe(path).splitlines()[1].startswith("- bbbbbbbbbbbb (on disk): 5 programs in 1 runs, 1 failure")


def test_a_bare_ledger_option_is_passed_on_to_the_jobs_without_its_neighbours() -> None:
    from .cli import _without_options

    argv = ["--ledger", "--minutes", "5", "--ledger=x", "--seed", "s", "--disable", "modules"]
    assert _without_options(argv, {"--ledger", "--seed"}) == ["--minutes", "5", "--disable", "modules"]


def test_breaks_inside_a_call_s_arguments_and_tables_keyed_by_dtype_are_fuzzed():
    # A tensor's bound method crossing a break (`x.view(brk(shape))`) called the real tensor in fake mode, and a
    # table keyed by dtypes was a graph break: both are now traced, so both are generated. brk returns its value.
    body = [Stmt(["v1 = x0.reshape(brk((-1, 1))).mul(brk(2))", "v1.view(BITS[v1.dtype]).add_(1)"])]
    program = _loop_program("calls", body, lambda x: (x.reshape(-1, 1) * 2).view(torch.int32).add(1).view(x.dtype))
    assert check(program) == []

    def bodies(features: Features) -> list[str]:
        return [generate(f"calls:{i}", features).source().split("def fn(")[1] for i in range(100)]

    made = bodies(Features())
    assert sum("brk(" in s for s in made) > 10 and any("(BITS[" in s for s in made)
    assert not any("brk(" in s for s in bodies(Features().without("call_breaks")))


def test_a_write_through_a_floats_bits_is_not_generated_for_a_nan():
    # (a248:1607) `torch.minimum(x1, x1).view(torch.int32).add_(1)` of a NaN: eager's vectorised minimum returns
    # the NaN of all ones bits (+1 gives 0.0), the compiled one the input's NaN. Which NaN is the kernel's choice.
    source = generate("a248:1607", Features(random=False, exceptions=False)).source()  # (as generated before draws)
    assert "torch.minimum(x1, x1)" in source and ".view(torch.int32).add_(1)" not in source


def test_try_statements_whose_body_raises_on_some_calls_sizes_are_fuzzed():
    # n // (n - 3) traced once n was dynamic (n == 4) also took n == 3: its graph divided by zero when it ran,
    # outside the try that catches the ZeroDivisionError
    risky = Stmt(["v1 = x0 * (x0.shape[0] // (x0.shape[0] - 3))"])
    body = [Stmt(clauses=[("try:", [risky]), (f"except {HANDLED}:", [Stmt(["v1 = x0 - 1"])])])]
    calls = [{"s0": n} for n in (3, 4, 6, 3)]
    program = Program(seed="try", args=[ArgSpec("x0", "tensor", dims=["s0"])], calls=calls, body=body)
    program.returns, program.return_style = ["v1"], "single"
    assert check(program, backends=("aot_eager",)) == []
    features = Features().only("exceptions", "pointwise", "new_sizes", "dynamic_shapes")
    sources = [generate(f"try:{i}", features).source() for i in range(100)]
    assert any(f"except {HANDLED}:" in s and "//" in s for s in sources)
    assert any(f"except {HANDLED}:" in s and ".view(" in s for s in sources)
