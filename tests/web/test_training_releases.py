"""The Training page and the Releases view on a constructed history, written with the contract's own writers and
ingested through the real ingest path into Postgres, in headless Chromium; the JSON API must say what the pages say.

The history (four nights, torch 2.5.0 twice, a nightly, 2.6.0):
- inference (timm_models, cpu): one model per verdict, designed so; the first 2.5.0 run differs from the second, so a
  comparison that did not take the *last* run of a version gets ``m_regress`` and ``m_newfail`` wrong;
- training (torchbench, cpu): ``tiny_train`` with raw step samples, hence throughput, at every version; a DDP (gloo)
  experiment at world sizes 1 and 2 at 2.6.0 only.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from perfdash.contract import AccuracyRow, ModelSamples, PerformanceRow, append_row, append_samples, throughput
from perfdash.manifest import MachineInfo, Manifest, RunConfig

MACHINE = MachineInfo(host="release-01", device="cpu", cpu_model="Release Xeon", cpu_count=8)
INFERENCE = RunConfig(suite="timm_models", backend="inductor", threads=8)
TRAINING = RunConfig(suite="torchbench", backend="inductor", mode="training", threads=8)
NIGHTLY = "2.6.0.dev20250101+cpu"
# night, torch version
NIGHTS = (("2025-01-10", "2.5.0"), ("2025-01-11", "2.5.0"), ("2025-01-12", NIGHTLY), ("2025-01-13", "2.6.0"))

# name -> (accuracy, speedup, compile s, compression ratio) per night index; None: not in that run.
# eager latency is 20 ms for every model: abs_latency = 20 / speedup.
PASS = "pass"
INFERENCE_MODELS: dict[str, tuple[tuple[str, float, float, float] | None, ...]] = {
    # first 2.5.0 run          last 2.5.0 run (the base)     nightly (ignored)           2.6.0 (the new side)
    "m_regress": ((PASS, 1.5, 20, 1.2), (PASS, 2.0, 20, 1.2), (PASS, 2.0, 20, 1.2), (PASS, 1.5, 20, 1.2)),
    "m_improve": ((PASS, 1.0, 20, 1.2), (PASS, 1.0, 20, 1.2), (PASS, 1.0, 20, 1.2), (PASS, 1.2, 20, 1.2)),
    "m_newfail": (("fail_accuracy", 1.3, 20, 1.2), (PASS, 1.3, 20, 1.2), (PASS, 1.3, 20, 1.2),
                  ("fail_accuracy", 1.3, 20, 1.2)),
    "m_fixed": (("fail_to_run", 0, 0, 0), ("fail_to_run", 0, 0, 0), (PASS, 1.4, 20, 1.2), (PASS, 1.4, 20, 1.2)),
    "m_same": ((PASS, 1.5, 20, 1.2), (PASS, 1.5, 20, 1.2), (PASS, 3.0, 20, 2.0), (PASS, 1.52, 20.5, 1.21)),
    "m_compile": ((PASS, 1.5, 20, 1.2), (PASS, 1.5, 20, 1.2), (PASS, 1.5, 20, 1.2), (PASS, 1.5, 30, 1.2)),
    "m_gone": ((PASS, 1.1, 20, 1.2), (PASS, 1.1, 20, 1.2), None, None),
    "m_added": (None, None, None, (PASS, 1.0, 20, 1.2)),
}
# What the history was built to show between 2.5.0 and 2.6.0 (m_same moves 1.3 % in speedup, 2.5 % in compile time,
# 0.8 % in memory: under every minimum effect; m_compile only in compile time, +50 %).
EXPECTED_INFERENCE = {"m_regress": "regression", "m_compile": "regression", "m_improve": "improvement",
                      "m_newfail": "new_failure", "m_fixed": "fixed", "m_same": "unchanged", "m_gone": "removed",
                      "m_added": "added"}
# tiny_train's training step, ms (eager, compiled) per process, batch 8, per night index; 2.6.0's compiled step is
# 32 -> 30 ms: speedup +6.7 %, throughput +6.7 %, latency -6.25 %: an improvement.
BATCH = 8
TRAIN_STEPS = ((40.0, 32.0), (40.0, 32.0), (40.0, 25.0), (40.0, 30.0))
DDP_STEPS = {1: (40.0, 30.0), 2: (44.0, 33.0)}  # world size -> per-process steps at 2.6.0


@dataclass(frozen=True)
class History:
    server: object
    database_url: str


def _write_run(folder: Path, config: RunConfig, night: str, version: str, commit: str,
               rows: list[tuple[str, str, float, float, float]], steps: tuple[float, float] | None = None) -> Path:
    """One run's files: manifest, performance and accuracy CSVs, and (training) the samples file."""
    folder.mkdir(parents=True)
    key = config.key()
    start = datetime.fromisoformat(f"{night}T01:00:00+00:00")
    Manifest(config=config, machine=MACHINE, torch_version=version, torch_git_commit=commit, start_time=start,
             end_time=start + timedelta(hours=1)).write(folder / key.filename("manifest"))
    for name, accuracy, speedup, compile_s, ratio in rows:
        if speedup:
            latency = steps[1] if steps is not None else 20.0 / speedup  # training: the compiled step
            row = PerformanceRow("cpu", name, BATCH, speedup, latency, compile_s, ratio, 1.0, 1.0 / ratio)
        else:
            row = PerformanceRow.failure("cpu", name)
        append_row(folder / key.filename("performance"), row)
        append_row(folder / key.filename("accuracy"), AccuracyRow("cpu", name, BATCH, accuracy))
        if steps is not None:
            eager, compiled = (steps[0],) * 5, (steps[1],) * 5
            append_samples(folder / key.filename("samples"), ModelSamples(
                name, BATCH, eager, compiled, eager_throughput=throughput(BATCH, eager, config.world_size),
                compiled_throughput=throughput(BATCH, compiled, config.world_size)))
    return folder


def _training_row(steps: tuple[float, float]) -> list[tuple[str, str, float, float, float]]:
    return [("tiny_train", PASS, steps[0] / steps[1], 30.0, 1.1)]


@pytest.fixture(scope="module")
def history(postgres_url: str, tmp_path_factory: pytest.TempPathFactory, web_harness) -> Iterator[History]:
    web = web_harness
    root = tmp_path_factory.mktemp("releases")
    url = web.fresh_database(postgres_url)
    for index, (night, version) in enumerate(NIGHTS):
        commit = f"{index + 1:x}" * 40
        rows = [(name, *values[index]) for name, values in INFERENCE_MODELS.items() if values[index] is not None]
        web.ingest_dir(url, _write_run(root / f"inference{index}", INFERENCE, night, version, commit, rows))
        web.ingest_dir(url, _write_run(root / f"training{index}", TRAINING, night, version, commit,
                                       _training_row(TRAIN_STEPS[index]), TRAIN_STEPS[index]))
    night, version = NIGHTS[-1]
    for world_size, steps in DDP_STEPS.items():
        config = TRAINING.model_copy(update={"world_size": world_size, "distributed_backend": "gloo"})
        web.ingest_dir(url, _write_run(root / f"ddp{world_size}", config, night, version, "4" * 40,
                                       _training_row(steps), steps))
    server = web.start_server(url)
    yield History(server=server, database_url=url)
    server.stop()


def _url(history: History) -> str:
    return history.server.url  # type: ignore[attr-defined]


def _releases_api(history: History, **params: str) -> dict:
    response = httpx.get(f"{_url(history)}/api/v1/releases/compare", params=params)
    response.raise_for_status()
    return response.json()


# --------------------------------------------------------------------------------------------------------------------
# Releases


def test_releases_api_counts_each_verdict_between_the_last_runs_of_two_versions(history: History) -> None:
    found = _releases_api(history, base="2.5.0", new="2.6.0", suite="timm_models")
    (config,) = found["configurations"]
    assert config["base_run"]["night"] == "2025-01-11"  # the later of the two 2.5.0 runs
    assert config["new_run"]["torch_version"] == "2.6.0"
    expected_counts: dict[str, int] = {}
    for verdict in EXPECTED_INFERENCE.values():
        expected_counts[verdict] = expected_counts.get(verdict, 0) + 1
    assert {k: v for k, v in config["counts"].items() if v} == expected_counts
    assert found["totals"] == config["counts"]
    verdicts = {m["name"]: m["verdict"] for m in found["models"]}
    assert verdicts == {k: v for k, v in EXPECTED_INFERENCE.items() if v != "unchanged"}  # unchanged: counted only
    regress = next(m for m in found["models"] if m["name"] == "m_regress")
    assert regress["metrics"]["speedup"]["change"] == pytest.approx(1.5 / 2.0 - 1)
    assert regress["metrics"]["abs_latency"]["change"] == pytest.approx((20 / 1.5) / (20 / 2.0) - 1)
    assert regress["metrics"]["abs_latency"]["direction"] == "worse"
    compile_only = next(m for m in found["models"] if m["name"] == "m_compile")
    assert compile_only["metrics"]["compilation_latency"]["change"] == pytest.approx(0.5)
    assert compile_only["metrics"]["speedup"]["direction"] == "same"
    # sorted by impact: status changes and regressions first, the larger regression before the smaller
    order = [m["name"] for m in found["models"]]
    assert order.index("m_newfail") < order.index("m_compile") < order.index("m_regress") < order.index("m_fixed")
    assert order.index("m_fixed") < order.index("m_improve")


def test_releases_api_filters_latest_and_unknown_versions(history: History) -> None:
    every = _releases_api(history, base="2.5.0", new="2.6.0")
    # the DDP configurations ran 2.6.0 only; the training configuration improved (throughput +6.7 %)
    assert len(every["only_new"]) == 2 and every["only_base"] == []
    training = next(c for c in every["configurations"] if c["configuration"]["mode"] == "training")
    assert {k: v for k, v in training["counts"].items() if v} == {"improvement": 1}
    tiny = next(m for m in every["models"] if m["name"] == "tiny_train")
    assert tiny["metrics"]["compiled_throughput"]["change"] == pytest.approx((8000 / 30) / (8000 / 32) - 1)
    latest = _releases_api(history, base="2.5.0", new="latest", suite="timm_models")
    assert latest["configurations"][0]["new_run"]["night"] == "2025-01-13"
    assert latest["configurations"][0]["counts"] == _releases_api(history, base="2.5.0", new="2.6.0",
                                                                  suite="timm_models")["configurations"][0]["counts"]
    nightly = _releases_api(history, base="2.5.0", new=NIGHTLY, suite="timm_models")
    # against the nightly m_same doubled its speedup and memory ratio and m_newfail still passed
    verdicts = {m["name"]: m["verdict"] for m in nightly["models"]}
    assert verdicts["m_same"] == "improvement" and "m_newfail" not in verdicts
    versions = httpx.get(f"{_url(history)}/api/v1/releases/versions").json()
    assert versions == ["2.6.0", NIGHTLY, "2.5.0"]
    missing = httpx.get(f"{_url(history)}/api/v1/releases/compare", params={"base": "2.4.0", "new": "2.6.0"})
    assert missing.status_code == 404 and "2.4.0" in missing.json()["detail"]


def test_releases_page_shows_what_the_api_returns(history: History, page: Page) -> None:
    params = {"base": "2.5.0", "new": "2.6.0", "suite": "timm_models"}
    api = _releases_api(history, **params)
    page.goto(f"{_url(history)}/releases?base=2.5.0&new=2.6.0&suite=timm_models")
    expect(page.locator("nav a.active")).to_have_text("Releases")
    expect(page.locator("#base-version")).to_have_value("2.5.0")
    expect(page.locator("#new-version")).to_have_value("2.6.0")
    row = page.locator("#release-configurations tbody tr")
    expect(row).to_have_count(1)
    for verdict in ("new_failure", "regression", "fixed", "improvement", "unchanged"):
        expect(row.locator(f"td[data-count='{verdict}']")).to_have_text(
            str(api["configurations"][0]["counts"][verdict]))
    models = page.locator("#release-models tbody tr")
    assert models.evaluate_all("rows => rows.map(r => [r.dataset.name, r.dataset.verdict])") == [
        [m["name"], m["verdict"]] for m in api["models"]]
    regress = page.locator("#release-models tr[data-name='m_regress']")
    expect(regress.locator("td[data-metric='speedup']")).to_have_text("-25.0%")
    expect(regress.locator("td[data-metric='speedup']")).to_have_class("num worse")
    link = regress.locator("td a").first
    series_id = next(m["series_id"] for m in api["models"] if m["name"] == "m_regress")
    expect(link).to_have_attribute("href", f"/model/{series_id}")
    # leave each page only once its scripts have loaded: navigating away aborts a pending chart library request,
    # which the page fixture reports as a failed request
    page.wait_for_load_state("networkidle")
    link.click()
    expect(page).to_have_url(f"{_url(history)}/model/{series_id}")
    page.wait_for_load_state("networkidle")
    # the permalink reproduces the view
    page.goto(f"{_url(history)}/releases?base=2.5.0&new=2.6.0&suite=timm_models")
    permalink = page.locator("#permalink").get_attribute("href")
    assert permalink is not None and "base=2.5.0" in permalink and "suite=timm_models" in permalink
    page.wait_for_load_state("networkidle")
    page.goto(_url(history) + permalink)
    expect(page.locator("#release-models tbody tr")).to_have_count(len(api["models"]))


def test_releases_page_defaults_to_the_newest_release_against_the_latest_runs(history: History, page: Page) -> None:
    page.goto(f"{_url(history)}/releases")
    expect(page.locator("#base-version")).to_have_value("2.6.0")
    expect(page.locator("#new-version")).to_have_value("latest")
    # every configuration's latest run is 2.6.0 itself: nothing changed
    expect(page.locator("#totals li[data-verdict='regression'] b")).to_have_text("0")


# --------------------------------------------------------------------------------------------------------------------
# Training


def test_training_page_draws_throughput_by_release_and_scaling(history: History, page: Page) -> None:
    api = httpx.get(f"{_url(history)}/api/v1/training", params={"model": "tiny_train"}).json()
    page.goto(f"{_url(history)}/training?model=tiny_train")
    expect(page.locator("nav a.active")).to_have_text("Training")
    group = page.locator("section.training-group")
    expect(group).to_have_count(1)
    expect(group.locator(".chart")).to_have_attribute("data-drawn", "true")
    # releases only (the latest run is a release, so no nightly): the last run of each, eager and compiled
    rows = group.locator("table.throughput tbody tr")
    assert rows.evaluate_all("rows => rows.map(r => r.dataset.version)") == ["2.5.0", "2.6.0"]
    for version, (eager, compiled) in (("2.5.0", TRAIN_STEPS[1]), ("2.6.0", TRAIN_STEPS[3])):
        row = group.locator(f"tr[data-version='{version}']")
        expect(row.locator("td.eager")).to_have_text(f"{BATCH * 1000 / eager:.1f}")
        expect(row.locator("td.compiled")).to_have_text(f"{BATCH * 1000 / compiled:.1f}")
    (series,) = api["throughput"]
    assert [(b["torch_version"], b["eager_throughput"], b["compiled_throughput"]) for b in series["bars"]] == [
        ("2.5.0", pytest.approx(200.0), pytest.approx(250.0)), ("2.6.0", pytest.approx(200.0),
                                                               pytest.approx(8000 / 30))]
    # scaling: world sizes 1 and 2 over gloo, factor throughput(2) / (2 x throughput(1))
    scaling = page.locator("section.scaling-group")
    expect(scaling).to_have_count(1)
    expect(scaling.locator(".chart")).to_have_attribute("data-drawn", "true")
    one = {side: 1000 * BATCH / step for side, step in zip(("eager", "compiled"), DDP_STEPS[1], strict=True)}
    two = {side: 2000 * BATCH / step for side, step in zip(("eager", "compiled"), DDP_STEPS[2], strict=True)}
    for side in ("eager", "compiled"):
        factor = two[side] / (2 * one[side])
        expect(scaling.locator(f"tr[data-world-size='2'] td.{side}-scaling")).to_have_text(f"{factor * 100:.1f} %")
        expect(scaling.locator(f"tr[data-world-size='2'] td.{side}")).to_have_text(f"{two[side]:.1f}")
    (experiment,) = api["scaling"]
    assert [p["world_size"] for p in experiment["points"]] == [1, 2]
    assert experiment["points"][1]["compiled_scaling"] == pytest.approx(two["compiled"] / (2 * one["compiled"]))
    assert experiment["points"][1]["compiled_ideal"] == pytest.approx(2 * one["compiled"])


def test_training_api_every_nightly(history: History) -> None:
    api = httpx.get(f"{_url(history)}/api/v1/training", params={"model": "tiny_train", "nightlies": "true"}).json()
    assert [b["torch_version"] for b in api["throughput"][0]["bars"]] == ["2.5.0", NIGHTLY, "2.6.0"]
    assert not any(b["release"] for b in api["throughput"][0]["bars"] if b["torch_version"] == NIGHTLY)


def test_training_nightlies_are_a_window_of_days_up_to_the_newest_run(history: History, page: Page) -> None:
    def versions(**params: str) -> list[str]:
        api = httpx.get(f"{_url(history)}/api/v1/training", params={"model": "tiny_train", "nightlies": "true",
                                                                    **params}).json()
        return [b["torch_version"] for b in api["throughput"][0]["bars"]]

    # the newest run is 2025-01-13, the nightly's 2025-01-12: one day holds the newest night only; releases always
    assert versions(nightly_days="1") == ["2.5.0", "2.6.0"]
    assert versions(nightly_days="2") == ["2.5.0", NIGHTLY, "2.6.0"]
    assert versions(nightly_days="0") == versions() == ["2.5.0", NIGHTLY, "2.6.0"]
    page.goto(f"{_url(history)}/training?model=tiny_train&nightlies=true&nightly_days=1")
    rows = page.locator("section.training-group table.throughput tbody tr")
    assert rows.evaluate_all("rows => rows.map(r => r.dataset.version)") == ["2.5.0", "2.6.0"]
    expect(page.locator("#nightly-window")).to_contain_text("2025-01-13")
    page.wait_for_load_state("networkidle")
    page.locator("#every-nightly").click()
    expect(page.locator("section.training-group table.throughput tbody tr")).to_have_count(3)
    page.wait_for_load_state("networkidle")


def test_pages_say_how_to_get_data_on_an_empty_database(empty, page: Page) -> None:
    page.goto(f"{empty.url}/training")
    expect(page.locator("#no-training")).to_be_visible()
    page.goto(f"{empty.url}/releases")
    expect(page.locator("#no-versions")).to_be_visible()
    assert httpx.get(f"{empty.url}/api/v1/training").json() == {"model": None, "models": [], "throughput": [],
                                                                 "scaling": [], "nightlies_since": None}


def test_releases_pairing_matches_the_rows_one_by_one(history: History) -> None:
    """pair_results reads the runs' results column by column (packed binary, names as one text) and pairs them in
    numpy: every model must carry its own row's values on each side, as reading the rows one by one says. Base
    2.5.0 against the nightly (m_gone, m_added and m_fixed change between them) and a run against itself."""
    import numpy as np
    import sqlalchemy as sa

    from service.db import session_scope
    from service.models import Result
    from service.queries import releases
    from service.queries.filters import ConfigFilter
    from service.settings import Settings

    with session_scope(Settings(database_url=history.database_url)) as session:
        for base, new in (("2.5.0", NIGHTLY), ("2.6.0", releases.LATEST)):
            before = releases.last_runs(session, base, ConfigFilter())
            after = releases.last_runs(session, new, ConfigFilter())
            runs = {c: (before[c].id, after[c].id) for c in sorted(set(before) & set(after))}
            paired = releases.pair_results(session, runs)
            expected: dict[tuple[int, str], dict[int, Result]] = {}
            for config, pair in runs.items():
                for side, run_id in enumerate(pair):
                    for row in session.scalars(sa.select(Result).where(Result.run_id == run_id)):
                        expected.setdefault((config, row.name), {})[side] = row
            assert sorted(zip(paired.configuration_id.tolist(), paired.name, strict=True)) == sorted(expected)
            for i, (config, name) in enumerate(zip(paired.configuration_id.tolist(), paired.name, strict=True)):
                sides = expected[(config, name)]
                assert paired.series_id[i] == (sides.get(1) or sides[0]).series_id
                for side in (0, 1):
                    row = sides.get(side)
                    got = paired.passed[side][i]
                    assert (np.isnan(got) if row is None else got == float(row.passed)), (name, side)
                    for key in releases._NUMBERS:
                        value = None if row is None else getattr(row, key)
                        got = paired.numbers[key][side][i]
                        assert (np.isnan(got) if value is None else got == value), (name, side, key)
