"""A run ready to store (:class:`RunBundle`), whichever way it came (result files: service.ingest.files; JSON:
service.ingest.payload), and what a run's start time may be: a start more than a day ahead of the server's clock is
refused."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from perfdash.contract import ContractError, ModelResult, ModelSamples
from perfdash.manifest import Manifest
from perfdash.metric_registry import RESULT_METRICS, Source

# The metrics of perfdash.metric_registry that come with the samples (training throughput): a JSON upload carries them
# beside the raw timings, under their names.
SAMPLE_METRICS: tuple[str, ...] = tuple(m.name for m in RESULT_METRICS if m.source is Source.SAMPLES)


@dataclass(frozen=True, slots=True)
class RunBundle:
    """One run, validated and joined, ready to store."""

    manifest: Manifest
    results: tuple[ModelResult, ...]
    samples: Mapping[str, ModelSamples]
    notices: tuple[str, ...] = ()  # what the user must hear: skipped files, repeated model rows (not content)
    # when the upload was made, for a run without a start of its own: it is dated then, not when it arrives (an
    # upload that waited in the spool across midnight stays on its night); never part of the run's key
    made_at: datetime | None = None

    @property
    def content_sha256(self) -> str:
        """The run's content, rows by name: the same rows in another order are the same run."""
        return self._content_digest(by_name=True)

    @property
    def file_order_sha256(self) -> str:
        """The content digest as runs stored before migration 0003 carry it (rows in file order), so re-posting one
        of them unchanged stays a no-op."""
        return self._content_digest(by_name=False)

    def _content_digest(self, *, by_name: bool) -> str:
        # Normalised content, so the same run posted as CSVs or as JSON hashes the same. Flattened by hand:
        # dataclasses.asdict over 150 nested rows cost a third of a night's ingest.
        def result(r: ModelResult) -> list:
            p = r.performance
            perf = None if p is None else [p.dev, p.speedup, p.abs_latency, p.compilation_latency,
                                           p.compression_ratio, p.eager_peak_mem, p.dynamo_peak_mem,
                                           p.stats.calls_captured, p.stats.unique_graphs, p.stats.graph_breaks,
                                           p.stats.unique_graph_breaks]
            return [r.name, r.batch_size, r.accuracy, perf]

        rows = [result(r) for r in self.results]
        body = {
            # fields added since runs were first hashed are left out when empty, so those runs hash as they did
            "manifest": self.manifest.model_dump(mode="json", exclude=_unset_since_v1(self.manifest)),
            "results": sorted(rows, key=lambda row: (row[0], row[1])) if by_name else rows,
            "samples": [[k, v.batch_size, v.eager_ms, v.compiled_ms, *_activation(v)]
                        for k, v in sorted(self.samples.items())],
        }
        return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()


_MANIFEST_FIELDS_SINCE_V1 = ("environment", "memory_definitions", "backend", "torch_requested", "night",
                             "model_phases", "compile_latency_definition")
# configuration fields added since, with the value that means "as before"
_CONFIG_FIELDS_SINCE_V1: dict[str, object] = {"warmup": None, "processes": 1, "min_loop_s": 0.0,
                                               "world_size": 1,
                                               "distributed_backend": None,
                                               "model_source": None}


def _unset_since_v1(manifest: Manifest) -> dict[str, bool | set[str]]:
    """The manifest fields added after runs were first hashed that this one leaves empty (a model_dump exclude)."""
    exclude: dict[str, bool | set[str]] = {name: True for name in _MANIFEST_FIELDS_SINCE_V1
                                           if not getattr(manifest, name)}
    config = {name for name, unset in _CONFIG_FIELDS_SINCE_V1.items() if getattr(manifest.config, name) == unset}
    if config:
        exclude["config"] = config
    return exclude


def _activation(samples: ModelSamples) -> list[list[object]]:
    """The activation peaks and the registry's samples-file metrics for the content hash; nothing when absent, so
    older files hash as they did."""
    peaks = [samples.eager_activation_peak_mem, samples.dynamo_activation_peak_mem]
    measured = [[name, value] for name in SAMPLE_METRICS if (value := getattr(samples, name)) is not None]
    return ([] if peaks == [None, None] else [peaks]) + measured + _generated_code_content(samples)


def _generated_code_content(samples: ModelSamples) -> list[list[object]]:
    """The generated code's part of the content hash (added with migration 0010): nothing when absent, so stored
    runs keep their hash."""
    out: list[list[object]] = []
    if samples.code is not None:
        out.append(["code", samples.code.to_json()])
    if samples.kernel_times:
        out.append(["kernel_times", [k.to_json() for k in samples.kernel_times]])
    if samples.code_source is not None:
        out.append(["code_source", samples.code_source])
    return out


# How far ahead of the server's clock a run may start (clocks of agents drift; a night never starts tomorrow).
MAX_CLOCK_AHEAD = timedelta(days=1)
# Nothing this service shows ran before torch.compile existed; older starts are typos or hostile input.
EARLIEST_START = datetime(2000, 1, 1, tzinfo=UTC)


def check_start_time(moment: datetime | None, where: str, now: datetime | None = None) -> None:
    """ContractError unless the run's start lies between 2000 and a day after ``now`` (default: the clock)."""
    if moment is None:
        return
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    limit = (now or datetime.now(UTC)) + MAX_CLOCK_AHEAD
    if aware > limit:
        raise ContractError(f"start time {moment.isoformat()} is more than a day ahead of the server's clock "
                            f"({limit - MAX_CLOCK_AHEAD:%Y-%m-%d %H:%M} UTC)", file=where)
    if aware < EARLIEST_START:
        raise ContractError(f"start time {moment.isoformat()} is before {EARLIEST_START:%Y-%m-%d}", file=where)


def as_utc(moment: datetime) -> datetime:
    """The moment in UTC; a naive one is taken as UTC."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
