"""The typed configuration of one ``perfdash run`` and the checks made before any work starts."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from perfdash import torch_spec
from perfdash.axes import CHECKED_FLAGS, RunAxes, run_axis_values
from perfdash.contract import BACKENDS
from perfdash.manifest import RunConfig
from runner.allocator import ALLOCATORS, DEFAULT_ALLOCATOR, AllocatorUnavailable, allocator_env
from runner.allocator import check as check_allocator
from runner.backends import BACKEND_SPECS, RUNNABLE_BACKENDS, BackendUnavailable, check
from runner.gpu_settings import NO_CUDAGRAPHS_VARIANT, timed_run_env
from runner.protocol import DEFAULT_DIAGNOSTIC_BUDGET_S
from runner.suites import ModelSpec, Suite, SuiteError, get_suite
from runner.suites.base import DEFAULT_MODEL_LIST

assert set(RUNNABLE_BACKENDS) <= set(BACKENDS)

DEFAULT_REPEAT = 30
DEFAULT_WARMUP = 5  # PyTorch's warm-up iterations (run_performance_test in benchmarks/dynamo/common.py)
DEFAULT_TIMEOUT_S = 1800.0


class OptionsError(ValueError):
    """A flag combination or model selection that cannot run; reported before any model starts."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions(RunAxes):
    """One ``perfdash run``: the configuration's axes (the fields of perfdash.axes.RunAxes), then which models, how
    to measure them and where to write."""

    output_dir: Path = Path("results")
    only: str | None = None
    filters: tuple[str, ...] = ()
    excludes: tuple[str, ...] = ()
    repeat: int = DEFAULT_REPEAT
    warmup: int = DEFAULT_WARMUP
    # worker processes per model's performance (pyperf's method): each times its share of ``repeat``, the result pools
    # them (process_repeats, runner.outcome.pool_processes); 1: one worker, as PyTorch's harness
    processes: int = 1
    # pyperf's minimum time: seconds of timed pairs per model (all its workers together) a model keeps timing pairs
    # for once its ``repeat`` are done (runner.protocol.loop_continues); 0: exactly ``repeat``, as PyTorch's harness
    min_loop_s: float = 0.0
    timeout_s: float = DEFAULT_TIMEOUT_S
    # seconds each diagnostic after the timed loop may take (kernel profile, fingerprint); an overrun is recorded
    diagnostic_budget_s: float = DEFAULT_DIAGNOSTIC_BUDGET_S
    accuracy: bool = False
    performance: bool = False
    total_partitions: int = 1
    partition_id: int = 0
    cold_start: bool = False
    models_file: Path | None = None
    allocator: str = DEFAULT_ALLOCATOR
    model_list: str = DEFAULT_MODEL_LIST  # one of the suite's named lists (runner/suites/data/<suite>.<list>.toml)
    quantize: str | None = None  # int8-dynamic (onnxruntime): a series of its own, variant int8_dynamic
    torch_spec: str | None = None  # the torch asked for (perfdash/torch_spec.py); None: whatever is installed
    night: date | None = None  # the nightly's night (the UTC date it started); None: the date this run starts
    # Extra worker environment (recorded in the manifest): tests use it, agents may pin settings with it.
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def run_accuracy(self) -> bool:
        return self.accuracy or not self.performance  # neither flag: both, as the dashboard runs

    @property
    def run_performance(self) -> bool:
        return self.performance or not self.accuracy

    @property
    def variant(self) -> str:
        parts = [] if self.quantize is None else [self.quantize.replace("-", "_")]
        if self.compile_mode != "default":
            parts.append(self.compile_mode.replace("-", "_"))
        if self.dynamic_shapes:
            parts.append("dynamic")
        if self.disable_cudagraphs:
            parts.append(NO_CUDAGRAPHS_VARIANT)  # last, as PyTorch CI's inductor_max_autotune_no_cudagraphs
        return "_".join(parts)

    def worker_env(self) -> dict[str, str]:
        """Settings every worker of this run gets; all of them are part of the series (manifest config.env)."""
        env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        spec = BACKEND_SPECS.get(self.backend)
        env.update(allocator_env(self.allocator, self.device, jemalloc=spec is None or spec.jemalloc))
        if self.device == "cpu" and self.mode == "inference" and self.backend == "inductor":
            env["TORCHINDUCTOR_FREEZING"] = "1"  # as PyTorch's CPU dashboard runs
        # CUDA: TF32, the reduced-precision SDPA math and Inductor's CUDA graphs, as PyTorch's harness times them
        env.update(timed_run_env(self.device, self.backend, cudagraphs=not self.disable_cudagraphs))
        if self.threads is not None:
            env["OMP_NUM_THREADS"] = str(self.threads)
        env.update(self.extra_env)
        return env

    def process_repeats(self) -> tuple[int, ...]:
        """Timed iterations of each of the ``processes`` workers: ``repeat`` split as evenly as it goes (the first
        ones take the remainder), so the result has the same number of pairs whatever the count of workers."""
        share, extra = divmod(self.repeat, self.processes)
        return tuple(share + (1 if index < extra else 0) for index in range(self.processes))

    def run_config(self) -> RunConfig:
        env = self.worker_env()
        # The suite's own lists say where their models come from; a --models-file's entries name their builders.
        try:
            source = get_suite(self.suite).model_source if self.models_file is None else None
        except SuiteError:
            source = None  # an unknown suite: validate() refuses it before any run
        return RunConfig(**run_axis_values(self), variant=self.variant, model_source=source,
                         cold_start=self.cold_start,
                         repeat=self.repeat, warmup=self.warmup, processes=self.processes,
                         min_loop_s=self.min_loop_s,
                         total_partitions=self.total_partitions,
                         partition_id=self.partition_id, env=env)


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise OptionsError(f"--{name} {value!r} is not one of {', '.join(allowed)}")


def check_torch(spec_text: str | None) -> None:
    """A run asked for one torch never measures another: the importable torch (read without importing it) must be
    the one ``spec_text`` names, or the run stops here, before any model, naming both."""
    if spec_text is None:
        return
    try:
        spec = torch_spec.parse(spec_text)
    except torch_spec.TorchSpecError as exc:
        raise OptionsError(f"--torch: {exc}") from None
    why = torch_spec.mismatch(spec, *torch_spec.installed_torch())
    if why is not None:
        raise OptionsError(f"--torch: {why}; nothing was run")


def validate(options: RunOptions) -> tuple[Suite, list[ModelSpec]]:
    """Check every flag and select this partition's models; raises OptionsError with a message for the user."""
    try:
        suite = get_suite(options.suite)
    except SuiteError as exc:
        raise OptionsError(str(exc)) from None
    _choice("backend", options.backend, RUNNABLE_BACKENDS)
    for axis in CHECKED_FLAGS:  # the contract's vocabulary of each configuration axis the runner takes as a flag
        # the suite and backend: what this runner can run (above); every checked axis has a flag and a vocabulary
        if axis.name not in ("suite", "backend") and axis.flag and axis.vocabulary:
            _choice(axis.flag.removeprefix("--"), getattr(options, axis.name), axis.vocabulary)
    _choice("allocator", options.allocator, ALLOCATORS)
    check_torch(options.torch_spec)
    try:
        check_allocator(options.worker_env())
    except AllocatorUnavailable as exc:
        raise OptionsError(f"--allocator {options.allocator} preloads what PyTorch's CPU dashboard preloads, but "
                           f"{exc}; or run with --allocator glibc") from None
    for name, value, minimum in (("repeat", options.repeat, 1), ("threads", options.threads, 1),
                                 ("batch-size", options.batch_size, 1), ("total-partitions",
                                                                         options.total_partitions, 1),
                                 ("warmup", options.warmup, 1)):
        if value is not None and value < minimum:
            raise OptionsError(f"--{name} must be >= {minimum}, got {value}")
    if not 1 <= options.processes <= max(options.repeat, 1):
        raise OptionsError(f"--processes must be in [1, --repeat ({options.repeat})]: each worker times at least one "
                           f"iteration, got {options.processes}")
    if not 0 <= options.min_loop_s < options.timeout_s:
        raise OptionsError(f"--min-loop-seconds must be in [0, --timeout ({options.timeout_s:g})), "
                           f"got {options.min_loop_s:g}")
    if options.timeout_s <= 0:
        raise OptionsError(f"--timeout must be > 0 seconds, got {options.timeout_s}")
    if not 0 <= options.partition_id < options.total_partitions:
        raise OptionsError(f"--partition-id must be in [0, {options.total_partitions - 1}], "
                           f"got {options.partition_id}")
    if options.device == "cuda" and not cuda_device_present():
        raise OptionsError("--device cuda: no NVIDIA GPU on this machine (no nvidia-smi, no /dev/nvidiactl)")
    _check_cudagraphs(options)
    try:
        check(options.backend, options.device, options.dtype, options.mode, options.quantize, options.compile_mode,
              options.dynamic_shapes)
    except BackendUnavailable as exc:
        raise OptionsError(str(exc)) from None
    if options.models_file is not None and options.model_list != DEFAULT_MODEL_LIST:
        raise OptionsError("--models-file and --model-list are alternatives: give one of them")
    try:
        models = suite.models(options.models_file, options.model_list, options.device)
        if options.only is not None and options.models_file is None and all(m.name != options.only for m in models):
            models = _list_holding(suite, options.only) or models
    except SuiteError as exc:
        raise OptionsError(str(exc)) from None
    models = suite.expand_models(models, options.batch_size) if suite.expand_models else models
    chosen = select_models(models, options)
    why = suite.check_ready(chosen) if suite.check_ready is not None else None
    if why is not None:
        raise OptionsError(f"{why}; nothing was run")
    return suite, chosen


def cuda_device_present() -> bool:
    """An NVIDIA GPU this process could use (its tool or its device node), asked without touching CUDA."""
    return shutil.which("nvidia-smi") is not None or Path("/dev/nvidiactl").exists()


def _check_cudagraphs(options: RunOptions) -> None:
    """--disable-cudagraphs names a series of Inductor on CUDA (the others never capture CUDA graphs), and cannot
    ask for a compile mode that is CUDA graphs (reduce-overhead); max-autotune becomes max-autotune-no-cudagraphs."""
    if not options.disable_cudagraphs:
        return
    if options.device != "cuda" or options.backend != "inductor":
        raise OptionsError("--disable-cudagraphs: only Inductor on CUDA captures CUDA graphs (--backend inductor "
                           "--device cuda)")
    if options.compile_mode == "reduce-overhead":
        raise OptionsError("--disable-cudagraphs contradicts --compile-mode reduce-overhead (CUDA graphs are what "
                           "that mode adds)")


def _list_holding(suite: Suite, name: str) -> list[ModelSpec] | None:
    """The first of the suite's named lists that holds ``name``: --only names one model, which any list may hold (a
    bisection of a model that a --model-list extended run measured); the lists' shared entries are the same."""
    for list_name in suite.model_lists():
        listed = suite.models(model_list=list_name)
        if any(m.name == name for m in listed):
            return listed
    return None


def _compile(patterns: tuple[str, ...], flag: str) -> list[re.Pattern[str]]:
    try:
        return [re.compile(p) for p in patterns]
    except re.error as exc:
        raise OptionsError(f"--{flag}: invalid regular expression: {exc}") from None


def select_models(models: list[ModelSpec], options: RunOptions) -> list[ModelSpec]:
    """--only / --filter / --exclude, then this partition's contiguous share (PyTorch's sharding)."""
    if options.only is not None:
        chosen = [m for m in models if m.name == options.only]
        if not chosen:
            known = ", ".join(m.name for m in models[:12]) + (", ..." if len(models) > 12 else "")
            raise OptionsError(f"--only {options.only!r}: no such model in suite {options.suite} (known: {known})")
    else:
        include = _compile(options.filters, "filter")
        exclude = _compile(options.excludes, "exclude")
        chosen = [m for m in models
                  if (not include or any(p.search(m.name) for p in include))
                  and not any(p.search(m.name) for p in exclude)]
        if not chosen:
            raise OptionsError(f"no model of suite {options.suite} matches --filter/--exclude")
    return partition(chosen, options.total_partitions, options.partition_id)


def partition(models: list[ModelSpec], total: int, index: int) -> list[ModelSpec]:
    """The index-th of ``total`` contiguous, near-equal shares; together they hold every model exactly once."""
    size, extra = divmod(len(models), total)
    start = index * size + min(index, extra)
    return models[start : start + size + (1 if index < extra else 0)]
