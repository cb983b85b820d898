"""The accuracy rule on real tensors (PyTorch's `same()` semantics: allclose, else RMSE against fp64), and the check
as PyTorch's check_accuracy runs it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from runner.accuracy import exactly_same, flatten, same, scalar_loss
from runner.check_settings import accuracy_settings
from runner.execute import collect, make_step, prepare, run_job
from runner.optimizer import make_optimizer
from runner.protocol import Job
from runner.suites.base import ModelSpec, Tolerance
from runner.suites.builders import BuildContext, BuiltModel, build


def _case(n: int = 4096) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    fp64 = torch.randn(n, generator=gen, dtype=torch.float64)
    return fp64, fp64.float()


def test_identical_and_within_tolerance_pass() -> None:
    fp64, ref = _case()
    assert same(ref, ref.clone(), fp64, tol=1e-4)
    assert same(ref, ref + 5e-5, fp64, tol=1e-4)


def test_perturbed_output_fails_even_against_fp64() -> None:
    fp64, ref = _case()
    assert not same(ref, ref + 1e-2, fp64, tol=1e-3)
    assert not same([ref, ref], [ref, ref + 1e-2], [fp64, fp64], tol=1e-3)


def test_rmse_rule_accepts_a_result_no_worse_than_eager() -> None:
    """Beyond allclose, the compiled result passes when it is about as close to fp64 as eager is."""
    gen = torch.Generator().manual_seed(1)
    fp64 = torch.randn(4096, generator=gen, dtype=torch.float64)
    ref = (fp64 + 1e-2 * torch.randn(4096, generator=gen, dtype=torch.float64)).float()  # eager: noisy
    res = (fp64 + 1e-2 * torch.randn(4096, generator=gen, dtype=torch.float64)).float()  # compiled: as noisy
    assert not torch.allclose(ref, res, atol=1e-3, rtol=1e-3)
    assert same(ref, res, fp64, tol=1e-3)
    worse = (fp64 + 5e-2 * torch.randn(4096, generator=gen, dtype=torch.float64)).float()
    assert not same(ref, worse, fp64, tol=1e-3)
    assert not same(ref, res, None, tol=1e-3)  # without a reference only allclose counts


def test_nan_dtype_and_the_larger_multiplier_follow_pytorch() -> None:
    nan = torch.tensor([1.0, float("nan")])
    assert same(nan, nan.clone(), tol=1e-3)  # NaNs equal (PyTorch's equal_nan, all dtypes but float32)...
    assert not same(nan, nan.clone(), tol=1e-3, equal_nan=False)  # ...not in float32 runs
    assert not same(torch.ones(3), torch.ones(3, dtype=torch.float64))  # exact dtype
    # A scalar loss: the compiled error 5x eager's fails at the usual multiplier (3 for small tensors), passes at
    # the 10 PyTorch gives the models it lists.
    fp64 = torch.tensor(1.0, dtype=torch.float64)
    ref, res = torch.tensor(1.0 + 1e-3), torch.tensor(1.0 + 5e-3)
    assert not same(ref, res, fp64, tol=1e-3)
    assert same(ref, res, fp64, tol=1e-3, larger_multiplier=True)


def test_integers_shapes_and_structure_must_match() -> None:
    ids = torch.arange(10)
    assert same(ids, ids.clone())
    assert not same(ids, ids + 1)
    assert not same(torch.zeros(3), torch.zeros(4))
    assert not same([torch.zeros(3)], [torch.zeros(3), torch.zeros(3)])


def test_eager_reruns_must_be_bit_identical() -> None:
    _, ref = _case()
    assert exactly_same([ref], [ref.clone()])
    assert not exactly_same([ref], [ref + 1e-7 * ref.abs().max()])


def test_flatten_and_loss_handle_model_outputs() -> None:
    out = {"logits": torch.ones(2, 3), "hidden": (torch.zeros(2), None)}
    assert [t.shape for t in flatten(out)] == [torch.Size([2, 3]), torch.Size([2])]
    assert scalar_loss(out).item() == 0.5


# --- The check as a worker runs it (in this process: the "eager" backend compiles nothing, so it takes seconds) ---

MODELS_DIR = Path(__file__).parent


def _job(builder: str, *, performance: bool = False, mode: str = "inference") -> Job:
    spec = ModelSpec(name=builder.rpartition(":")[2], batch_size=2, builder=builder, base_dir=str(MODELS_DIR))
    return Job(suite="huggingface", spec=spec, batch_size=2, device="cpu", dtype="float32", mode=mode,
               backend="eager", compile_mode="default", dynamic_shapes=False, repeat=2, warmup=2, accuracy=True,
               performance=performance, threads=None, tolerance=Tolerance(1e-3))


def _built(job: Job) -> BuiltModel:
    return build(job.spec, BuildContext(device="cpu", batch_size=job.batch_size, training=job.mode == "training"))


def test_an_output_holding_a_cache_object_is_compared_by_its_tensors() -> None:
    """A transformers decoder with its KV cache on returns a DynamicCache: its tensors are leaves like any other,
    so two eager runs agree and a change inside the cache is seen."""
    built = _built(_job("py:models.py:cached_decoder"))
    module = built.module.eval()
    with torch.no_grad():
        first, second = module(**built.kwargs), module(**built.kwargs)
    assert type(first.past_key_values).__name__ == "DynamicCache"
    leaves = flatten(first)
    cache_tensors = [t for layer in first.past_key_values.layers for t in (layer.keys, layer.values)]
    assert all(any(leaf is t for leaf in leaves) for t in cache_tensors)
    assert not any(type(leaf).__name__ == "DynamicCache" for leaf in leaves)
    assert exactly_same(flatten(first), flatten(second))
    second.past_key_values.layers[0].values.add_(1e-3)
    assert not exactly_same(flatten(first), flatten(second))


def test_a_model_whose_output_holds_a_cache_passes_the_check() -> None:
    result = run_job(_job("py:models.py:cached_decoder"), lambda phase: None)
    assert result.failure is None, result.failure
    assert result.accuracy == "pass"
    # The accuracy-only check fills the counters and compile time of PyTorch's accuracy row.
    assert result.accuracy_stats is not None and result.accuracy_stats["unique_graphs"] >= 1
    assert result.accuracy_stats["calls_captured"] > 0
    assert result.accuracy_compile_s is not None and result.accuracy_compile_s > 0


def test_graph_breaks_count_the_step_frame_as_pytorch_does() -> None:
    """PyTorch compiles its whole iteration function (optimize_ctx(model_iter_fn)), so a break inside the model also
    breaks the iteration's frame: its CSVs count the model's two breaks as three (AllenaiLongformerBase 4 and
    DistillGPT2 3 in cpu_inductor_freezing_huggingface_inference.csv where compiling the module counts 3 and 2). The
    accuracy row and the performance row count alike."""
    result = run_job(_job("py:models.py:two_breaks", performance=True), lambda phase: None)
    assert result.failure is None and result.accuracy == "pass"
    assert result.accuracy_stats is not None and result.accuracy_stats["graph_breaks"] == 3
    assert result.performance is not None and result.performance.stats.graph_breaks == 3


def test_each_run_of_the_check_is_a_fresh_copy_run_twice() -> None:
    """PyTorch's run_n_iterations: two iterations per run, the last one's output kept; each run (eager, eager again,
    compiled) starts from the pristine model, also after the timed loop ran its own copies many times."""
    job = _job("py:models.py:counting")
    p = prepare(_built(job), job)
    [out] = collect(p.module, make_step(p.module, p, job), job)
    with torch.no_grad():
        assert torch.equal(out, p.module.net(*p.args) * 2)
    result = run_job(_job("py:models.py:counting", performance=True), lambda phase: None)
    assert result.failure is None, result.failure
    assert result.performance is not None and result.accuracy == "pass"


def test_the_check_runs_under_pytorch_accuracy_settings_and_restores_them() -> None:
    from torch._inductor import config as inductor_config

    before = (torch.are_deterministic_algorithms_enabled(), torch.backends.mkldnn.deterministic,
              inductor_config.fallback_random, torch.backends.cudnn.benchmark)
    with accuracy_settings("resnet18"):
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.backends.mkldnn.deterministic and torch.backends.cudnn.deterministic
        assert inductor_config.fallback_random
        assert not torch.backends.cudnn.benchmark
    with accuracy_settings("vgg16"):  # one of the models setup_determinism leaves without deterministic algorithms
        assert not torch.are_deterministic_algorithms_enabled()
        assert torch.backends.mkldnn.deterministic
    assert (torch.are_deterministic_algorithms_enabled(), torch.backends.mkldnn.deterministic,
            inductor_config.fallback_random, torch.backends.cudnn.benchmark) == before


def test_training_compares_what_collect_results_keeps() -> None:
    """Loss, every parameter's gradient (zero where none), the parameters after the step, the buffers."""
    job = _job("py:models.py:counting", mode="training")
    p = prepare(_built(job), job)
    before = [q.detach().clone() for q in p.module.parameters()]
    leaves = collect(p.module, make_step(p.module, p, job), job)
    params = list(p.module.parameters())
    assert len(leaves) == 1 + 2 * len(params) + 1  # loss, grads, parameters, the `calls` buffer
    assert leaves[-1].item() == 2  # two iterations
    # On CPU PyTorch's harness trains without an optimizer: gradients, but the parameters stay as they were.
    assert all(torch.equal(a, b) for a, b in zip(before, leaves[1 + len(params):1 + 2 * len(params)], strict=True))
    assert all(g.abs().sum() > 0 for g in leaves[1:1 + len(params)])


def test_optimizers_are_pytorch_choices() -> None:
    params = [torch.nn.Parameter(torch.zeros(2))]
    assert make_optimizer("resnet18", "cpu", "inductor", params, checking_accuracy=False) is None
    assert isinstance(make_optimizer("resnet18", "cuda", "inductor", params, False), torch.optim.SGD)
    assert isinstance(make_optimizer("lcnet_050", "cuda", "inductor", params, False), torch.optim.Adam)
    assert make_optimizer("MobileBertForMaskedLM", "cuda", "inductor", params, False) is None
    dinov2 = "vit_base_patch14_dinov2.lvd142m"
    assert isinstance(make_optimizer(dinov2, "cuda", "inductor", params, checking_accuracy=True), torch.optim.SGD)
    assert isinstance(make_optimizer(dinov2, "cuda", "inductor", params, checking_accuracy=False), torch.optim.Adam)


def test_a_model_pytorch_does_not_check_is_pass_due_to_skip() -> None:
    """huggingface.yaml's large models: PyTorch records pass_due_to_skip, with zero counters, before any run."""
    job = replace(_job("py:models.py:perturbed"), tolerance=Tolerance(1e-3, skip=True))
    phases: list[str] = []
    result = run_job(job, phases.append)
    assert result.failure is None and result.accuracy == "pass_due_to_skip"  # perturbed, but never compared
    assert result.accuracy_stats is not None and set(result.accuracy_stats.values()) == {0}
    timed: list[str] = []
    both = run_job(replace(job, performance=True), timed.append)
    assert both.failure is None and both.accuracy == "pass_due_to_skip" and both.performance is not None
    assert timed[:2] == ["load", "eager_validate"]  # loaded and validated, as PyTorch's load_model does
    assert "compiled_run" not in timed  # never compared


def test_an_accuracy_only_job_does_not_build_a_model_whose_check_is_skipped() -> None:
    """BlenderbotForCausalLM on CPU (issue 42 item 4): the status PyTorch's CI records, without the 20 GB its build
    and validation would hold. The model here raises when it runs: building or validating it would fail the job."""
    job = replace(_job("py:models.py:raises"), tolerance=Tolerance(1e-3, skip=True), performance=False)
    phases: list[str] = []
    result = run_job(job, phases.append)
    assert (result.failure, result.accuracy, phases) == (None, "pass_due_to_skip", [])
    assert result.accuracy_stats is not None and set(result.accuracy_stats.values()) == {0}
    assert run_job(replace(job, tolerance=Tolerance(1e-3)), []).accuracy is None  # not skipped: it fails as usual


def test_a_model_that_cannot_run_eagerly_fails_its_validation() -> None:
    phases: list[str] = []
    result = run_job(_job("py:models.py:raises"), phases.append)
    assert result.failure is not None and result.failure.phase == "eager_validate"
    assert "always raises" in result.failure.message and phases == ["load", "eager_validate"]


def test_performance_times_a_copy_while_the_loaded_model_stays_alive() -> None:
    """As PyTorch's run_performance_test (deepcopy_and_maybe_parallelize, the loaded model kept by run()): the timed
    model is a copy, so the loaded one is never run and both are alive in the peak-memory readings; a performance-only
    job too (until issue 32 it timed the loaded model itself, one copy of the weights fewer than PyTorch's)."""
    from runner.execute import Phases, _measure

    job = replace(_job("py:models.py:counting", performance=True), accuracy=False)
    base = prepare(_built(job), job)
    performance = _measure(base, job, Phases(lambda phase: None, {}), {}).performance
    assert len(performance.eager_ms) == job.repeat
    assert float(base.module.calls) == 0  # Counting counts its forward calls in a buffer: the loaded model never ran
