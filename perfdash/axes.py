"""The axes of a configuration, defined once: what makes two runs of a suite comparable.

Each axis says its name (the field of perfdash.manifest.RunConfig, or of the stored configuration for the derived
ones), its type, its vocabulary (from the contract), the ``perfdash run`` flag that sets it, the column of the stored
configuration (service.models.Configuration), whether it enters the configuration key and whether pages and the API
filter on it. What derives from this table:

- the configuration key and the stored configuration's columns (``configuration_identity`` in service.ingest.keys,
  ``configuration_columns`` in service.ingest.store);
- the runner's vocabulary checks and flag choices (runner.options; ``add_choice_flags`` for the command lines of
  runner.cli, runner.scale_cli and perfbisect.cli) and the repro command of a series
  (``run_flags``, used by the Model page and by the bisect tool's ``perfdash run``);
- the fields of what ``perfdash run`` is told to measure (``RunAxes``: the axes with a flag, their defaults), which
  the runner's options (runner.options.RunOptions) and the bisect tool's target (perfbisect.pytorch.TorchTarget)
  are made of;
- the fields of the configuration filter (service.queries.filters.ConfigFilter: ``FILTER_AXES``);
- which axes split each summary into groups (``SummaryScope``; ``summary_group``): the Summary page, the nightly
  report and ``perfdash summary``;
- the bisection request, which points at a stored configuration and sends the bisect tool its axes.

The Jenkinsfile's parameters stay text, named after these axes. Torch-free and service-free.
"""

from __future__ import annotations

import enum
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from perfdash.contract import BACKENDS, COMPILE_MODES, DEVICES, DTYPES, MODES, SUITES
from perfdash.manifest import RunConfig

DISTRIBUTED_BACKENDS: tuple[str, ...] = ("gloo", "nccl")


class SummaryScope(enum.Enum):
    """A summary that groups a night's runs into tables (one column per suite, one row per backend)."""

    PAGE = "page"  # the Summary page (service.web.views.home_groups); the axes that do not split it label its rows
    REPORT = "report"  # the nightly report: one report, one GitHub comment, per group (service.detection.report)
    CLI = "cli"  # `perfdash summary`: one section per group (service.summary_cli)


EVERY_SUMMARY = frozenset(SummaryScope)


@dataclass(frozen=True, slots=True)
class Axis:
    name: str  # RunConfig's field (or property, for derived axes) and the configuration key's name
    type: type
    default: Any
    vocabulary: tuple[str, ...] | None = None  # None: open (a number, a derived name, a mapping)
    flag: str | None = None  # the `perfdash run` option, None when the runner derives the axis
    column: str | None = None  # the stored configuration's column, None when not stored as itself
    in_key: bool = True  # part of the configuration key
    # Entered the key after configurations were first stored: only when it differs from its default, so the keys of
    # configurations stored before it existed do not change (tests/service/test_content_hash_compat.py).
    key_unless_default: bool = False
    filterable: bool = False  # a field of the configuration filter (pages, API)
    explicit: bool = False  # always written in a command line, even at its default (the series reads by it)
    splits: frozenset[SummaryScope] = frozenset()  # the summaries whose groups differ in it (summary_group)
    help: str = ""

    @property
    def stored_column(self) -> str:
        """The column of an axis the stored configuration has (those a filter or a bisection request names)."""
        if self.column is None:
            raise ValueError(f"the axis {self.name} is not a column of the stored configuration")
        return self.column

    def value(self, config: RunConfig) -> Any:
        value = getattr(config, self.name)
        return dict(sorted(value.items())) if isinstance(value, Mapping) else value


def _default(name: str) -> Any:
    """RunConfig's own default of a field: the contract defines it, the axis repeats nothing."""
    return RunConfig.model_fields[name].get_default(call_default_factory=True)


AXES: tuple[Axis, ...] = (
    Axis("suite", str, None, SUITES, flag="--suite", column="suite", filterable=True, explicit=True),
    Axis("backend", str, "inductor", BACKENDS, flag="--backend", column="backend", filterable=True, explicit=True,
         help="filters match the backend with its variant, as file names write it (inductor_no_cudagraphs)"),
    Axis("variant", str, _default("variant"), None, column="variant",
         help="derived by the runner from --quantize, --compile-mode, --dynamic-shapes and --disable-cudagraphs; "
              "PyTorch CI names it"),
    Axis("compile_mode", str, _default("compile_mode"), COMPILE_MODES, flag="--compile-mode", column="compile_mode",
         filterable=True, splits=frozenset({SummaryScope.REPORT, SummaryScope.CLI})),
    Axis("device", str, _default("device"), DEVICES, flag="--device", column="device", filterable=True, explicit=True,
         splits=EVERY_SUMMARY),
    Axis("dtype", str, _default("dtype"), DTYPES, flag="--dtype", column="dtype", filterable=True, explicit=True,
         splits=EVERY_SUMMARY),
    Axis("mode", str, _default("mode"), MODES, flag="--mode", column="mode", filterable=True, explicit=True,
         splits=EVERY_SUMMARY),
    Axis("threads", int, _default("threads"), None, flag="--threads", column="threads", in_key=False,
         help="a thread count, None for all cores of the socket; the key holds its thread_config"),
    Axis("thread_config", str, "all-cores", None, column="thread_config", filterable=True, splits=EVERY_SUMMARY,
         help="single-thread, N-threads or all-cores, derived from threads"),
    Axis("batch_size", int, _default("batch_size"), None, flag="--batch-size", column="batch_size_override",
         splits=frozenset({SummaryScope.REPORT, SummaryScope.CLI}),
         help="an override of the suite's batch sizes (another configuration); None: the suite's own"),
    Axis("dynamic_shapes", bool, _default("dynamic_shapes"), None, flag="--dynamic-shapes", column="dynamic_shapes",
         filterable=True, splits=frozenset({SummaryScope.REPORT, SummaryScope.CLI})),
    Axis("disable_cudagraphs", bool, False, None, flag="--disable-cudagraphs", in_key=False,
         help="Inductor on CUDA without CUDA graphs: the variant holds it (no_cudagraphs, PyTorch CI's name)"),
    Axis("env", dict, _default("env"), None, column="env", help="worker settings such as TORCHINDUCTOR_FREEZING=1"),
    Axis("world_size", int, _default("world_size"), None, column="world_size", key_unless_default=True, filterable=True,
         help="DistributedDataParallel processes; 1: a single process"),
    Axis("distributed_backend", str, _default("distributed_backend"), DISTRIBUTED_BACKENDS,
         column="distributed_backend",
         key_unless_default=True, filterable=True, help="torch.distributed process-group backend"),
    Axis("model_source", str, _default("model_source"), None, key_unless_default=True,
         help="where the suite's models come from (torchbench: torchbenchmark); the runner sets it from the suite, "
              "so series of the torchvision stand-ins perfdash ran before are never joined to TorchBench's"),
)
AXIS: Mapping[str, Axis] = {axis.name: axis for axis in AXES}
# The configuration filter's fields beside the axes: the machine (a fingerprint) and one stored configuration.
FILTER_AXES: tuple[Axis, ...] = tuple(axis for axis in AXES if axis.filterable)
# The axes the runner checks against the contract's vocabulary (a flag with a closed set of values).
CHECKED_FLAGS: tuple[Axis, ...] = tuple(axis for axis in AXES if axis.flag and axis.vocabulary)
# The axes `perfdash run` takes as flags: the fields of RunAxes.
RUN_AXES: tuple[Axis, ...] = tuple(axis for axis in AXES if axis.flag)
# The axes that split each summary into groups, in the axes' order (each a column of the stored configuration).
SUMMARY_AXES: Mapping[SummaryScope, tuple[Axis, ...]] = {
    scope: tuple(axis for axis in AXES if scope in axis.splits) for scope in SummaryScope}


@dataclass(frozen=True, slots=True, kw_only=True)
class RunAxes:
    """The configuration ``perfdash run`` measures, one field per axis with a flag (RUN_AXES, in its order), each
    defaulting to its axis' default. The runner's options and the bisect tool's target extend it (keyword-only, so
    they add their own fields in any order). Written out for the type checker and the reader;
    tests/contract/test_axes.py fails when a field is missing or its default differs from its axis."""

    suite: str
    backend: str = AXIS["backend"].default
    compile_mode: str = AXIS["compile_mode"].default
    device: str = AXIS["device"].default
    dtype: str = AXIS["dtype"].default
    mode: str = AXIS["mode"].default
    threads: int | None = AXIS["threads"].default
    batch_size: int | None = AXIS["batch_size"].default
    dynamic_shapes: bool = AXIS["dynamic_shapes"].default
    disable_cudagraphs: bool = AXIS["disable_cudagraphs"].default


def run_axis_values(source: Any) -> dict[str, Any]:
    """The run axes' values of anything that has them as attributes (a RunAxes, parsed ``perfdash run`` or
    ``perfdash bisect`` arguments: their dests are the axes' names), by name."""
    return {axis.name: getattr(source, axis.name) for axis in RUN_AXES}


def add_choice_flags(parser: Any, names: tuple[str, ...]) -> None:
    """Add the named axes' flags to an argparse parser or group, each with its axis' default and vocabulary
    (``perfdash run``, ``perfdash bisect``, ``perfdash scale``)."""
    for name in names:
        axis = AXIS[name]
        parser.add_argument(axis.flag, default=axis.default, choices=axis.vocabulary)


def configuration_identity(config: RunConfig, machine_fingerprint: str) -> dict[str, Any]:
    """What the configuration key hashes: every key axis, and the machine."""
    identity: dict[str, Any] = {"machine": machine_fingerprint}
    for axis in AXES:
        if not axis.in_key:
            continue
        value = axis.value(config)
        if axis.key_unless_default and value == axis.default:
            continue
        identity[axis.name] = value
    return identity


def configuration_columns(config: RunConfig) -> dict[str, Any]:
    """The stored configuration's columns (service.models.Configuration), machine and key aside."""
    return {axis.column: axis.value(config) for axis in AXES if axis.column is not None}


def run_command(values: Mapping[str, Any], model: str | None = None) -> str:
    """The `perfdash run` command line that measures a configuration (its axis values by name; the variant is
    derived by the runner, except the quantized series' ``int8_dynamic`` prefix, which is --quantize) again, for one
    model when given. Quoted for a shell. A ``no_cudagraphs`` variant is --disable-cudagraphs."""
    values = {**values}
    values.setdefault("disable_cudagraphs", variant_disables_cudagraphs(str(values.get("variant") or "")))
    args = ["perfdash", "run", *run_flags(values)]
    if str(values.get("variant") or "").split("_")[:2] == ["int8", "dynamic"]:  # onnxruntime's quantized series
        args += ["--quantize", "int8-dynamic"]
    if model is not None:
        args += ["--only", model]
    return shlex.join(args)


def variant_disables_cudagraphs(variant: str) -> bool:
    """Whether a variant is one of Inductor without CUDA graphs (``no_cudagraphs``, ``max_autotune_no_cudagraphs``:
    PyTorch CI's names, which the runner's variant follows)."""
    return variant == "no_cudagraphs" or variant.endswith("_no_cudagraphs")


def stored_axes(configuration: Any) -> dict[str, Any]:
    """The axis values of a stored configuration (anything with the axes' columns as attributes), by axis name; the
    axes the variant holds (--disable-cudagraphs) read from it."""
    values = {axis.name: getattr(configuration, axis.column) for axis in AXES if axis.column is not None}
    values["disable_cudagraphs"] = variant_disables_cudagraphs(str(values.get("variant") or ""))
    return values


def run_flags(values: Mapping[str, Any]) -> list[str]:
    """The `perfdash run` flags that set these axis values (by axis name), in the axes' order: the explicit axes
    always, the others only when they differ from their default; a bool axis is a switch."""
    args: list[str] = []
    for axis in AXES:
        if axis.flag is None or axis.name not in values:
            continue
        value = values[axis.name]
        if axis.type is bool:
            if value:
                args.append(axis.flag)
        elif value is not None and (axis.explicit or value != axis.default):
            args += [axis.flag, str(value)]
    return args


def summary_axis_values(configuration: Any, scope: SummaryScope) -> dict[str, Any]:
    """A stored configuration's values (anything with the axes' columns as attributes) of the axes that split one
    summary, by axis name in the axes' order."""
    return {axis.name: getattr(configuration, axis.stored_column) for axis in SUMMARY_AXES[scope]}


def summary_group(configuration: Any, scope: SummaryScope) -> tuple[tuple[str, Any], ...]:
    """The group of one summary that a stored configuration's runs fall in: its values of the axes that split that
    summary, then ``("machine", its machine's fingerprint)``: the machine splits every summary, as it is part of every
    configuration key, so two machines' runs never share a table."""
    return (*summary_axis_values(configuration, scope).items(), ("machine", configuration.machine.fingerprint))
