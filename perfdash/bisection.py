"""The bisection contract between the service and the bisect tool (``perfbisect``), written once.

The service stores a request (``POST /api/v1/bisections``: a finding's id, or every field explicitly), the bisect job
fetches it (``GET /api/v1/bisections/{id}``: ``BisectionOut``) and posts what it found (``POST .../result``:
``BisectionResult``). Both sides import these models; neither builds the bodies by hand. Torch-free and
service-free: the bisect tool installs with the runner, not with FastAPI.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from perfdash.ab import AbRecord, Sample
from perfdash.axes import AXIS
from perfdash.metric_registry import BISECT_METRICS, Better
from perfdash.verdicts import BisectionVerdictName

# What a bisection (or a confirm request: good and bad measured side by side) concluded: the vocabulary's words
# (perfdash.verdicts.BisectionVerdictName says what each means), as a Literal so the wire schema is a plain enum.
BISECTION_VERDICTS: tuple[str, ...] = tuple(v.value for v in BisectionVerdictName)
BisectionVerdict = Literal[BISECTION_VERDICTS]  # type: ignore[valid-type]  # the vocabulary's names
# What one probe of the search decided about a commit; "skip": it did not build or measure (never blamed).
StepDecision = Literal["good", "bad", "skip"]
# bisect: find the culprit; confirm: only re-measure the last good and first bad builds (a candidate's A/B).
BisectionPurpose = Literal["bisect", "confirm"]
BisectionStatus = Literal["pending", "running", "done"]
Direction = Better  # which way is better; the strings "higher" / "lower" on the wire
# the metrics a bisection can chase: the registry's detected metrics and the accuracy status
BisectMetric = Literal[BISECT_METRICS]  # type: ignore[valid-type]  # the registry's names: known when it runs only
# One measurement (Sample, perfdash.ab's): the metric's value, or a status word (an accuracy status, "crash",
# "timeout") when there is none.

# The configuration axes (perfdash.axes) a request carries to the bisect tool: what `perfdash run` needs to measure the
# model again. The service stores the request as a pointer to its configuration and sends these.
REQUEST_AXES: tuple[str, ...] = ("suite", "backend", "variant", "compile_mode", "dtype", "mode", "device", "threads")
assert set(REQUEST_AXES) <= set(AXIS)

# Thread configurations by name, as the Jenkins bisect pipeline sends them: None means all cores (of a socket).
_ALL_CORES_NAMES = frozenset({"", "all", "socket", "all-cores"})
_SINGLE_THREAD_NAMES = frozenset({"single", "single-thread"})


def parse_threads(value: object) -> int | None:
    """A thread count from a count or a name: ``single`` is 1; ``all``/``socket``/``all-cores``/empty/None mean all
    cores (None). Anything else raises ValueError."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"threads {value!r}")
    if isinstance(value, int):
        return value
    name = str(value).strip().lower()
    if name in _ALL_CORES_NAMES:
        return None
    if name in _SINGLE_THREAD_NAMES:
        return 1
    if name.isdigit():
        return int(name)
    raise ValueError(f"threads {value!r} is not a count, 'single' or 'all'")


class Culprit(BaseModel):
    sha: str
    subject: str = ""
    author: str = ""
    date: str = ""


class BisectStep(BaseModel):
    sha: str
    samples: list[Sample] = Field(default_factory=list)
    decision: str  # a StepDecision; kept open so an older tool's answer is still stored
    reason: str = ""
    forced: bool = False  # the A/B reached its cap undecided; the step went to the side its median is nearer
    ab: AbRecord | None = None  # the step's A/B (good against this commit): every sample, the order, every round


class BisectionResult(BaseModel):
    """The body of ``POST /api/v1/bisections/{id}/result``."""

    verdict: BisectionVerdict
    culprit: Culprit | None = None
    steps: list[BisectStep] = Field(default_factory=list)
    good_samples: list[Sample] = Field(default_factory=list)
    bad_samples: list[Sample] = Field(default_factory=list)
    summary: str = ""
    jenkins_build_url: str | None = None
    change_pct: float | None = None  # the A/B change of good to bad (% worse), when the tool reports it
    p_value: float | None = None
    # the commits the first bad one is among: the range of a culprit range, what a search not confirmed pointed at
    candidates: list[Culprit] = Field(default_factory=list)
    confirmation: AbRecord | None = None  # good against bad, as measured (good_samples / bad_samples are its sides)
    verification: AbRecord | None = None  # the named culprit (or the range's last commit) against its parent


class _RequestFields(BaseModel):
    """What both request bodies share: the configuration axes with perfdash.axes' defaults (suite and backend are
    declared by each body), the batch size, and how to judge the metric."""

    model_config = ConfigDict(extra="forbid")

    variant: str = AXIS["variant"].default
    compile_mode: str = AXIS["compile_mode"].default
    dtype: str = AXIS["dtype"].default
    mode: str = AXIS["mode"].default
    device: str = AXIS["device"].default
    threads: int | None = AXIS["threads"].default
    batch_size: int | None = None
    direction: Direction | None = None
    threshold_pct: float | None = Field(None, ge=0)

    @field_validator("threads", mode="before")
    @classmethod
    def _threads(cls, value: object) -> int | None:
        return parse_threads(value)


class BisectionFields(_RequestFields):
    """A request made without a finding: every field of the configuration explicitly."""

    suite: str
    model: str
    backend: str
    metric: BisectMetric
    good_commit: str = Field(min_length=4, max_length=64)
    bad_commit: str = Field(min_length=4, max_length=64)


class BisectionIn(_RequestFields):
    """The body of ``POST /api/v1/bisections``: ``{"finding_id": int}`` or the explicit fields (BisectionFields)."""

    # the document says so too (the service's OpenAPI): a finding, or every explicit field not null
    model_config = ConfigDict(json_schema_extra={"anyOf": [
        {"required": ["finding_id"], "properties": {"finding_id": {"type": "integer"}}},
        {"required": ["suite", "model", "backend", "metric", "good_commit", "bad_commit"],
         "properties": {**{name: {"type": "string", "minLength": 1} for name in ("suite", "model", "backend")},
                        **{name: {"type": "string", "minLength": 4, "maxLength": 64}  # as BisectionFields
                           for name in ("good_commit", "bad_commit")},
                        "metric": {"enum": list(BISECT_METRICS)}}}]})

    finding_id: int | None = None
    suite: str | None = None
    model: str | None = None
    backend: str | None = None
    metric: str | None = None
    good_commit: str | None = None
    bad_commit: str | None = None


class BisectionOut(BaseModel):
    """A stored request as the service answers it and the bisect tool reads it: what to measure (the configuration's
    REQUEST_AXES, the model and batch size), which range, and ``result`` once the tool has posted it."""

    id: int
    status: BisectionStatus
    purpose: BisectionPurpose
    finding_id: int | None
    configuration_id: int
    suite: str
    model: str
    backend: str
    variant: str
    compile_mode: str
    dtype: str
    mode: str
    device: str
    threads: int | None
    batch_size: int | None
    metric: str
    direction: Direction
    good_commit: str
    bad_commit: str
    threshold_pct: float
    created_at: datetime
    result: BisectionResult | None
    # the series' own between-run noise, which the bisect tool pools into every A/B's scale (perfdash.ab.NoisePrior);
    # null where the series has no estimate (too few runs, a metric without one): the A/Bs learn the noise alone
    series_noise_cv: float | None = Field(None, ge=0, description="the series' between-run noise of the metric "
                                          "(robust CV, relative: 0.03 = 3 %) before the change; null: no estimate")
    series_noise_runs: int | None = Field(None, ge=1, description="the runs series_noise_cv rests on")
