"""The database schema as typed SQLAlchemy 2 models. The tables exist only through Alembic (migrations/).

Shape of the data (years of nightly runs, ~3M result rows):

- ``Machine``: one row per fingerprint (CPU model + cores, or GPU name + driver + CUDA), never per host.
- ``Configuration``: everything that makes two runs of one suite comparable — suite, backend + variant, compile
  mode, dtype, mode, device, thread config, batch-size override, dynamic shapes, env settings, machine. Its ``key``
  is a hash of those fields. "The previous night" of a run is the previous run of the same configuration.
- ``Run``: one execution of a configuration (one night), with versions, commit, timing and provenance.
- ``Series``: (configuration, model name, batch size) — the unit history, comparison and detection work on.
- ``Result``: one model in one run, accuracy status and performance values (raw, not gated; ``passed`` says
  whether the accuracy gate let the speedup count).
- ``RunSummary``: the suite summary of a run computed once at ingest with perfdash.metrics, so pages never
  aggregate result rows.
- ``Annotation``: a note on a configuration, a series or a night.
- ``ChangePointRow``, ``Finding``, ``BisectionRequest`` (migration 0002): what detection stored (a level change of a
  series' metric or of the suite geomean, the newest being the baseline later detection starts from), what a person
  should look at (``key`` makes detection idempotent), and the bisection contract's requests (perfdash.bisection:
  ``confirm`` re-measures a candidate's last good and first bad builds side by side, ``bisect`` finds the culprit)
  with their result once the bisect job reports. Here, not under service/detection/, so reads and pages import the
  schema without importing detection.
- ``GeneratedCode``: what Inductor generated for one model of one run (perfdash.generated_code): the fingerprint,
  the top kernels of the profile and the packed normalised source for the code diff (migration 0010).
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from perfdash.bisection import BisectionPurpose, BisectionStatus
from perfdash.contract import gated_speedup
from perfdash.metric_registry import RESULT_METRICS
from perfdash.verdicts import ConfirmationState

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    # every model maps one Table (none a join or a select): what Core inserts use (Result.__table__.insert())
    __table__: ClassVar[sa.Table]
    metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {dict[str, Any]: sa.JSON, datetime: sa.DateTime(timezone=True)}


class Machine(Base):
    __tablename__ = "machines"

    id: Mapped[int] = mapped_column(primary_key=True)
    fingerprint: Mapped[str] = mapped_column(sa.String(300), unique=True)
    device: Mapped[str] = mapped_column(sa.String(16))
    cpu_model: Mapped[str | None] = mapped_column(sa.String(200))
    cpu_count: Mapped[int | None]
    gpu_name: Mapped[str | None] = mapped_column(sa.String(200))
    gpu_driver: Mapped[str | None] = mapped_column(sa.String(64))
    cuda_version: Mapped[str | None] = mapped_column(sa.String(64))
    created_at: Mapped[datetime] = mapped_column(server_default=sa.func.now())


class Configuration(Base):
    __tablename__ = "configurations"

    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(sa.String(64), unique=True)
    machine_id: Mapped[int] = mapped_column(sa.ForeignKey("machines.id"), index=True)
    suite: Mapped[str] = mapped_column(sa.String(32))
    backend: Mapped[str] = mapped_column(sa.String(32))
    variant: Mapped[str] = mapped_column(sa.String(64), default="")
    compile_mode: Mapped[str] = mapped_column(sa.String(32), default="default")
    dtype: Mapped[str] = mapped_column(sa.String(16))
    mode: Mapped[str] = mapped_column(sa.String(16))
    device: Mapped[str] = mapped_column(sa.String(16))
    threads: Mapped[int | None]
    thread_config: Mapped[str] = mapped_column(sa.String(32))
    batch_size_override: Mapped[int | None]
    dynamic_shapes: Mapped[bool] = mapped_column(default=False)
    env: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # DistributedDataParallel processes and their backend (gloo/nccl); 1 and None for a single process
    world_size: Mapped[int] = mapped_column(default=1, server_default="1")
    distributed_backend: Mapped[str | None] = mapped_column(sa.String(16))

    machine: Mapped[Machine] = relationship(lazy="joined")

    @property
    def backend_variant(self) -> str:
        return backend_variant(self.backend, self.variant)


def backend_variant(backend: str, variant: str) -> str:
    """A configuration's compiler as PyTorch names it (``inductor_no_cudagraphs``): the backend and its variant."""
    return f"{backend}_{variant}" if variant else backend


RUN_INCLUDE: tuple[str, ...] = ("started_at", "id", "partition_id", "total_partitions", "torch_git_commit")


class Run(Base):
    __tablename__ = "runs"
    __table_args__ = (
        # previous night of a configuration; suite-summary history over a date range. Postgres: covering what the
        # previous-run probes (service.queries.order) and a model's history read of a run, so neither reads the
        # runs' heap, where a configuration's runs are one page a night apart (issue 31)
        sa.Index("ix_runs_configuration_night", "configuration_id", "night", postgresql_include=list(RUN_INCLUDE)),
        sa.Index("ix_runs_torch_version", "torch_version", "configuration_id"),  # the Releases view
        # every ingest looks for runs whose hooks have not run: only those rows are indexed
        sa.Index("ix_runs_hooks_pending", "id", postgresql_where=sa.text("hooks_pending"),
                 sqlite_where=sa.text("hooks_pending")),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    run_key: Mapped[str] = mapped_column(sa.String(64), unique=True)  # idempotency: hash of the run's metadata
    content_sha256: Mapped[str] = mapped_column(sa.String(64))  # the same key with other content is a conflict
    configuration_id: Mapped[int] = mapped_column(sa.ForeignKey("configurations.id"))
    night: Mapped[date] = mapped_column(index=True)
    started_at: Mapped[datetime | None]
    ended_at: Mapped[datetime | None]
    torch_version: Mapped[str | None] = mapped_column(sa.String(64))
    torch_git_commit: Mapped[str | None] = mapped_column(sa.String(64), index=True)
    suite_versions: Mapped[dict[str, Any]] = mapped_column(default=dict)
    host: Mapped[str | None] = mapped_column(sa.String(200))
    jenkins_url: Mapped[str | None] = mapped_column(sa.String(500))
    source: Mapped[str] = mapped_column(sa.String(16))  # perfdash | pytorch
    command: Mapped[str | None] = mapped_column(sa.Text)
    partition_id: Mapped[int] = mapped_column(default=0)
    total_partitions: Mapped[int] = mapped_column(default=1)
    # the manifest's software environment beyond the configuration (kernel, microcode, perfdash version, ...)
    environment: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON)
    ingested_at: Mapped[datetime] = mapped_column(server_default=sa.func.now())
    # True from the ingest's commit until the post-ingest hooks (detection) have run: a run committed just before
    # the database went away is picked up by the next ingest or `perfdash detect`.
    hooks_pending: Mapped[bool] = mapped_column(default=False, server_default=sa.false())
    # when the raw timings of this run's results were dropped (service/retention.py); None: they are kept.
    # Deferred: only retention reads it, and a run loaded by any page does not need it
    samples_compacted_at: Mapped[datetime | None] = mapped_column(deferred=True)

    configuration: Mapped[Configuration] = relationship(lazy="joined")
    summary: Mapped[RunSummary | None] = relationship(back_populates="run", lazy="joined")
    results: Mapped[list[Result]] = relationship(back_populates="run", order_by="Result.name", lazy="raise_on_sql")


class Series(Base):
    __tablename__ = "series"
    __table_args__ = (sa.UniqueConstraint("configuration_id", "name", "batch_size", name="uq_series_identity"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    configuration_id: Mapped[int] = mapped_column(sa.ForeignKey("configurations.id"))
    name: Mapped[str] = mapped_column(sa.String(200))
    batch_size: Mapped[int]

    configuration: Mapped[Configuration] = relationship(lazy="joined")


# The metric columns of ``results``, one nullable float per entry of perfdash.metric_registry (speedup, abs_latency,
# compilation_latency, compression_ratio, the throughputs), named as the metric; None where the run did not measure
# it. Raw, not gated: ``passed`` says whether the accuracy gate let the model count. A new entry needs a migration
# adding its column (tests/service/test_migrations.py checks both agree).
# Any to a type checker: the columns are made from the registry at import, so it cannot know their names.
ResultMetricColumns: Any = type("ResultMetricColumns", (), {
    m.name: mapped_column(sa.Float, nullable=True) for m in RESULT_METRICS})


# What a model's history reads of each result (service.queries.history.model_history), carried by its index so the
# history is an index-only scan: a night's results are stored together, so a series' rows are one heap page a night
# apart, and reading them was most of a whole-history read at 30M results (602 pages for 604 points; issue 31).
HISTORY_INCLUDE: tuple[str, ...] = ("accuracy", "passed", *(m.name for m in RESULT_METRICS), "eager_peak_mem",
                                    "dynamo_peak_mem", "graph_breaks", "speedup_ci_low", "speedup_ci_high",
                                    "eager_activation_peak_mem", "dynamo_activation_peak_mem")


class Result(ResultMetricColumns, Base):
    __tablename__ = "results"
    __table_args__ = (
        sa.UniqueConstraint("run_id", "name", name="uq_results_run_name"),  # also the index of "one run's results"
        # a model's history (Postgres: covering; SQLite has no INCLUDE)
        sa.Index("ix_results_series_history", "series_id", "run_id", postgresql_include=list(HISTORY_INCLUDE)),
    )

    id: Mapped[int] = mapped_column(sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True)
    run_id: Mapped[int] = mapped_column(sa.ForeignKey("runs.id", ondelete="CASCADE"))
    series_id: Mapped[int] = mapped_column(sa.ForeignKey("series.id"))
    name: Mapped[str] = mapped_column(sa.String(200))
    batch_size: Mapped[int]
    accuracy: Mapped[str | None] = mapped_column(sa.String(64))  # None: no accuracy file in the run
    passed: Mapped[bool]  # the accuracy gate: the speedup counts (gated speedup > 0)
    eager_peak_mem: Mapped[float | None]
    dynamo_peak_mem: Mapped[float | None]
    calls_captured: Mapped[int | None]
    unique_graphs: Mapped[int | None]
    graph_breaks: Mapped[int | None]
    unique_graph_breaks: Mapped[int | None]
    # 95 % confidence interval of the speedup from the raw samples (perfdash.confidence), set at ingest
    speedup_ci_low: Mapped[float | None]
    speedup_ci_high: Mapped[float | None]
    # perfdash's own activation peaks (GB) from the samples file, also kept in ``samples``: as columns, the history's
    # index carries them (migration 0012 copied them out of the stored samples)
    eager_activation_peak_mem: Mapped[float | None]
    dynamo_activation_peak_mem: Mapped[float | None]
    # {"eager_ms": [...], "compiled_ms": [...]}; deferred: ~100 floats a row that only detail views want
    samples: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON(none_as_null=True), deferred=True)
    error: Mapped[str | None] = mapped_column(sa.Text)  # why it failed, from the manifest

    run: Mapped[Run] = relationship(back_populates="results")

    @property
    def gated_speedup(self) -> float:
        return gated_speedup(self.speedup, self.passed)


class GeneratedCode(Base):
    __tablename__ = "generated_code"

    run_id: Mapped[int] = mapped_column(sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(200), primary_key=True)  # the model (a result's name in the run)
    digest: Mapped[str] = mapped_column(sa.String(64))
    graphs: Mapped[int]
    kernels: Mapped[int]
    kernel_digests: Mapped[list[list[str]]] = mapped_column(sa.JSON)  # [[name, digest], ...] (bounded)
    kernel_times: Mapped[list[list[Any]]] = mapped_column(sa.JSON)  # [[name, self_us, share, calls], ...]
    # zlib + base64 of the normalised source, capped (perfdash.generated_code.pack_source); only the diff reads it
    source: Mapped[str | None] = mapped_column(sa.Text, deferred=True)


class RunSummary(Base):
    __tablename__ = "run_summaries"

    run_id: Mapped[int] = mapped_column(sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    passed: Mapped[int]
    total: Mapped[int]
    geomean_speedup: Mapped[float | None]
    geomean_speedup_unclipped: Mapped[float | None]
    mean_compile_time_s: Mapped[float | None]
    mean_compression_ratio: Mapped[float | None]
    warnings: Mapped[list[dict[str, str]]] = mapped_column(sa.JSON, default=list)  # [{"name", "reason"}]
    # len(warnings), stored at ingest: lists and the night summary show the count, and counting in the database
    # (json_array_length) parsed ~4 kB of JSON a run, 70 ms of a night's summary at PyTorch's matrix (issue 31).
    # Deferred: read as a column (queries/runs.py WARNINGS_COUNT), never through a loaded summary
    warnings_count: Mapped[int | None] = mapped_column(deferred=True)

    run: Mapped[Run] = relationship(back_populates="summary")


class Annotation(Base):
    __tablename__ = "annotations"

    id: Mapped[int] = mapped_column(primary_key=True)
    configuration_id: Mapped[int | None] = mapped_column(sa.ForeignKey("configurations.id"), index=True)
    series_id: Mapped[int | None] = mapped_column(sa.ForeignKey("series.id"), index=True)
    night: Mapped[date | None] = mapped_column(index=True)
    text: Mapped[str] = mapped_column(sa.Text)
    author: Mapped[str | None] = mapped_column(sa.String(200))
    created_at: Mapped[datetime] = mapped_column(server_default=sa.func.now())


class AuditEntry(Base):
    """One write through the API (migration 0009_audit_log): which token, what, when. Added by the scope check
    (service/api/auth.py) to the request's session, so it is stored exactly when the write is committed; a refused
    attempt (401/403) is stored at once, ``outcome`` "refused", never with the secret it presented (migration
    0014_audit_refusals)."""

    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(primary_key=True)
    at: Mapped[datetime] = mapped_column(server_default=sa.func.now(), index=True)
    token_name: Mapped[str] = mapped_column(sa.String(64), index=True)
    scope: Mapped[str] = mapped_column(sa.String(16))
    action: Mapped[str] = mapped_column(sa.String(120))  # "DELETE /api/v1/runs/{run_id}": the route, not the URL
    target: Mapped[str] = mapped_column(sa.String(200), default="")  # its path parameters: "run_id=5"
    detail: Mapped[str] = mapped_column(sa.String(500), default="")  # what the write did, where the route says
    outcome: Mapped[str] = mapped_column(sa.String(16), default="done", server_default="done")  # done | refused
    client: Mapped[str] = mapped_column(sa.String(64), default="", server_default="")  # the peer's address


class ChangePointRow(Base):
    __tablename__ = "change_points"
    __table_args__ = (
        sa.UniqueConstraint("configuration_id", "series_id", "metric", "run_id", name="uq_change_points_identity"),
        sa.Index("ix_change_points_series_metric", "series_id", "metric"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    configuration_id: Mapped[int] = mapped_column(sa.ForeignKey("configurations.id"))
    series_id: Mapped[int | None] = mapped_column(sa.ForeignKey("series.id"))  # NULL: the suite's geomean
    metric: Mapped[str] = mapped_column(sa.String(32))
    run_id: Mapped[int] = mapped_column(sa.ForeignKey("runs.id", ondelete="CASCADE"))  # first run of the new level
    previous_run_id: Mapped[int | None] = mapped_column(sa.ForeignKey("runs.id", ondelete="SET NULL"))  # last old
    good_commit: Mapped[str | None] = mapped_column(sa.String(64))
    bad_commit: Mapped[str | None] = mapped_column(sa.String(64))
    before_mean: Mapped[float]
    after_mean: Mapped[float]
    change_pct: Mapped[float]
    p_value: Mapped[float]
    n_before: Mapped[int]
    n_after: Mapped[int]
    regression: Mapped[bool]
    created_at: Mapped[datetime] = mapped_column(server_default=sa.func.now())


class Finding(Base):
    __tablename__ = "findings"
    __table_args__ = (sa.Index("ix_findings_run", "run_id"), sa.Index("ix_findings_series", "series_id"))

    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(sa.String(200), unique=True)  # idempotency of detection
    kind: Mapped[str] = mapped_column(sa.String(16))  # status | performance | summary
    category: Mapped[str] = mapped_column(sa.String(16))  # regression | improvement | new_failure | fixed
    configuration_id: Mapped[int] = mapped_column(sa.ForeignKey("configurations.id"), index=True)
    series_id: Mapped[int | None] = mapped_column(sa.ForeignKey("series.id"))
    run_id: Mapped[int] = mapped_column(sa.ForeignKey("runs.id", ondelete="CASCADE"))  # the run that showed it
    change_point_id: Mapped[int | None] = mapped_column(
        sa.ForeignKey("change_points.id", ondelete="CASCADE"), unique=True
    )
    model: Mapped[str | None] = mapped_column(sa.String(200))
    metric: Mapped[str | None] = mapped_column(sa.String(32))  # speedup | abs_latency | ... | accuracy | passrate
    old_status: Mapped[str | None] = mapped_column(sa.String(64))
    new_status: Mapped[str | None] = mapped_column(sa.String(64))
    old_value: Mapped[float | None]
    new_value: Mapped[float | None]
    change_pct: Mapped[float | None]
    p_value: Mapped[float | None]
    good_commit: Mapped[str | None] = mapped_column(sa.String(64))
    bad_commit: Mapped[str | None] = mapped_column(sa.String(64))
    summary: Mapped[str] = mapped_column(sa.Text)
    acknowledged_at: Mapped[datetime | None]
    acknowledged_by: Mapped[str | None] = mapped_column(sa.String(200))
    ack_note: Mapped[str | None] = mapped_column(sa.Text)
    # a perfdash.verdicts.ConfirmationState (the lifecycle: service.alerts.confirmation)
    confirmation: Mapped[str] = mapped_column(sa.String(16), default=ConfirmationState.NONE.value,
                                              server_default=ConfirmationState.NONE.value, index=True)
    confirmation_result: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON)  # the A/B figures
    # did the generated code change between the two runs compared (perfdash.code_change; migration 0010)
    code_change: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON)
    created_at: Mapped[datetime] = mapped_column(server_default=sa.func.now())

    configuration: Mapped[Configuration] = relationship(lazy="joined")
    series: Mapped[Series | None] = relationship(lazy="joined")
    run: Mapped[Run] = relationship(lazy="joined")
    change_point: Mapped[ChangePointRow | None] = relationship(lazy="joined")

    @property
    def acknowledged(self) -> bool:
        return self.acknowledged_at is not None


class BisectionRequest(Base):
    __tablename__ = "bisection_requests"
    __table_args__ = (sa.UniqueConstraint("finding_id", "purpose", name="uq_bisection_requests_finding_purpose"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    status: Mapped[BisectionStatus] = mapped_column(sa.String(16), index=True)  # pending | running | done
    # bisect: find the culprit; confirm: only measure good and bad side by side (a candidate's A/B re-measurement)
    purpose: Mapped[BisectionPurpose] = mapped_column(sa.String(16), default="bisect", server_default="bisect")
    finding_id: Mapped[int | None] = mapped_column(sa.ForeignKey("findings.id", ondelete="SET NULL"))
    # what to measure: one model (at a batch size) of a stored configuration, whose axes the bisect tool receives
    configuration_id: Mapped[int] = mapped_column(sa.ForeignKey("configurations.id"), index=True)
    model: Mapped[str] = mapped_column(sa.String(200))
    batch_size: Mapped[int | None]
    metric: Mapped[str] = mapped_column(sa.String(32))
    direction: Mapped[str] = mapped_column(sa.String(8))  # higher | lower: which way is better
    good_commit: Mapped[str] = mapped_column(sa.String(64))
    bad_commit: Mapped[str] = mapped_column(sa.String(64))
    threshold_pct: Mapped[float]
    # the series' own between-run noise of the metric (robust CV, relative) and the runs it rests on, sent to the
    # bisect tool as its A/Bs' noise prior (perfdash.ab.NoisePrior); null: no estimate (migration 0015)
    series_noise_cv: Mapped[float | None]
    series_noise_runs: Mapped[int | None]
    result: Mapped[dict[str, Any] | None] = mapped_column(sa.JSON)
    created_at: Mapped[datetime] = mapped_column(server_default=sa.func.now())
    updated_at: Mapped[datetime | None]

    configuration: Mapped[Configuration] = relationship(lazy="joined")


class ReleasePair(Base):
    """The Releases view's judgement of one pair of runs of a configuration (service/release_verdicts.py), kept at
    ingest for the pairs the view is asked for: each release's last run against the configuration's latest run and
    against each newer release's last run (migration 0013). ``criteria`` is perfdash.judgement's fingerprint of
    what was judged: a row of other criteria is not read. Runs never change once stored, so a row stays true
    until one of its runs is deleted (the cascade drops it).

    The models that are not ``unchanged`` are packed in the row, element i of each column the same model (one row
    a pair, not one a model: a night of PyTorch's matrix would add ~150,000 rows against five releases): what the
    view sorts by (verdict, impact, name); their values and statuses are read from ``results`` for those shown."""

    __tablename__ = "release_pairs"
    __table_args__ = (
        sa.UniqueConstraint("base_run_id", "new_run_id", "criteria", name="uq_release_pairs_runs_criteria"),
        sa.Index("ix_release_pairs_configuration_id", "configuration_id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    configuration_id: Mapped[int] = mapped_column(sa.ForeignKey("configurations.id", ondelete="CASCADE"))
    base_run_id: Mapped[int] = mapped_column(sa.ForeignKey("runs.id", ondelete="CASCADE"))
    new_run_id: Mapped[int] = mapped_column(sa.ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    criteria: Mapped[str] = mapped_column(sa.String(64))
    counts: Mapped[dict[str, int]] = mapped_column(sa.JSON)  # verdict name -> models, every verdict
    names: Mapped[list[str]] = mapped_column(sa.JSON)  # the models not unchanged
    verdicts: Mapped[bytes] = mapped_column(sa.LargeBinary)  # uint8 each: index into perfdash.verdicts.MODEL_VERDICTS
    impacts: Mapped[bytes] = mapped_column(sa.LargeBinary)  # little-endian float64 each
