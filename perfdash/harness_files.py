"""What each file in a PyTorch benchmark output directory is, so a directory ingests as the harness leaves it.

PyTorch's harness (benchmarks/dynamo/common.py) writes, for every result CSV it appends to:

- the CSV itself (``{stem}_performance.csv`` / ``{stem}_accuracy.csv`` in CI; ``speedup_{backend}.csv`` /
  ``accuracy_{backend}.csv`` or any ``--output`` name when run by hand);
- ``{csv stem}.json``: the same rows as records for PyTorch's benchmark database (``write_outputs`` ->
  ``output_json``), read by :mod:`perfdash.pytorch_json`;
- after each performance row, ``{csv stem}_compilation_metrics.csv`` (and its ``.json``): compile-phase times from
  ``torch._dynamo.utils.compile_times`` — not a result file;
- with ``--generate-aot-autograd-stats``, ``{csv stem}_stats.csv``; with graph-break logging,
  ``{csv stem}_graph_breaks.csv`` and ``..._graph_breaks_deduped.csv``.

runner.py's summary step adds ``passrate.csv``, ``geomean.csv``, ``comp_time.csv``, ``memory.csv`` (and
``gh_*.txt``, ``*.png``) to the same directory; the dashboard archive has ``lookup.csv``. perfdash recomputes those
numbers, so they are skipped, and every skipped file is reported with the reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from pathlib import PurePath

from perfdash.contract import KINDS, ContractError, ResultFileName, RunKey

MANIFEST_SUFFIX = "_manifest.json"
SAMPLES_SUFFIX = "_samples.jsonl"


class Role(Enum):
    RESULT_CSV = "result CSV"
    BENCHMARK_JSON = "benchmark-database JSON records"
    MANIFEST = "manifest"
    SAMPLES = "raw samples"
    COMPANION = "companion file"


# (pattern on the file name, why it is not a result file); checked before the result-file names.
_COMPANIONS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r".*_compilation_metrics\.(csv|json)$"),
     "compile-phase times the harness writes beside each result (torch._dynamo.utils.compile_times)"),
    (re.compile(r".*_graph_breaks(_deduped)?\.(csv|json)$"), "graph-break reasons, not results"),
    (re.compile(r".*_stats\.(csv|json)$"), "AOT autograd graph counts (--generate-aot-autograd-stats), not results"),
    (re.compile(r"^(passrate|geomean|comp_time|memory)\.csv$"),
     "runner.py's summary table; perfdash computes the summary from the result files"),
    (re.compile(r"^lookup\.csv$"), "runner.py's dashboard archive index"),
    (re.compile(r".*\.(txt|png|log|out|html|md)$"), "not a result file"),
)

# Names the harness gives a result file when run by hand (common.py ``run``: ``output_filename``).
_HAND_RUN_NAME = re.compile(r"^(speedup|accuracy|tolerance)_[A-Za-z0-9_]+\.(csv|json)$|^(inductor|export[a-z_]*|"
                            r"torchscript_jit_trace|xla|nothing|overheads|coverage)\.(csv|json)$")


@dataclass(frozen=True, slots=True)
class Classified:
    name: str
    role: Role
    stem: str = ""  # the run's stem (without _performance/_accuracy) for result, manifest and samples files
    kind: str = ""  # performance | accuracy for result files
    reason: str = ""  # why a companion is skipped


def classify(raw_name: str) -> Classified:
    """The role of one file of an output directory; a result file whose name carries no configuration raises a
    :class:`ContractError` that says which flags name it."""
    name = PurePath(raw_name).name
    if name.endswith(MANIFEST_SUFFIX):
        return Classified(name, Role.MANIFEST, stem=name[: -len(MANIFEST_SUFFIX)])
    if name.endswith(SAMPLES_SUFFIX):
        return Classified(name, Role.SAMPLES, stem=name[: -len(SAMPLES_SUFFIX)])
    for pattern, reason in _COMPANIONS:
        if pattern.match(name):
            return Classified(name, Role.COMPANION, reason=reason)
    if name.endswith(".json"):
        # A benchmark-database file carries its configuration in its records; its name may be anything.
        base = name[: -len(".json")]
        kind = next((k for k in KINDS if base.endswith("_" + k)), "")
        stem = base[: -len(kind) - 1] if kind else ""
        return Classified(name, Role.BENCHMARK_JSON, stem=stem, kind=kind)
    if _HAND_RUN_NAME.match(name):
        raise ContractError("the harness's default output name says nothing of the suite, dtype, mode or device; "
                            "name the run with --suite S --backend B --dtype D --mode M [--device cpu|cuda]",
                            file=name)
    try:
        parsed = ResultFileName.parse(name)
    except ContractError as exc:
        raise ContractError(f"{exc.message}; rename it, or name the run with --suite S --backend B --dtype D "
                            "--mode M [--device cpu|cuda]", file=name) from None
    return Classified(name, Role.RESULT_CSV, stem=parsed.key.stem, kind=parsed.kind)


def kind_of_hand_run_file(name: str, header: str) -> str:
    """performance or accuracy for a file named by hand (``speedup_inductor.csv``, ``--output x.csv``): from the
    name when it says, else from the header (an ``accuracy`` column is an accuracy file)."""
    base = PurePath(name).name.lower()
    if base.startswith("accuracy") or base.endswith("_accuracy.csv"):
        return "accuracy"
    if base.startswith(("speedup", "performance")) or base.endswith("_performance.csv"):
        return "performance"
    columns = [c.strip() for c in header.split(",")]
    if "accuracy" in columns:
        return "accuracy"
    if "speedup" in columns:
        return "performance"
    raise ContractError("cannot tell a performance file from an accuracy file: no speedup or accuracy column",
                        file=name, line=1)


def contract_name(key: RunKey, kind: str, suffix: str = ".csv") -> str:
    return f"{key.stem}_{kind}{suffix}"
