"""Each series' noise and detectable change as the reads and the JSON API give them (issue 39 item 3), on a real
Postgres from posted runs whose spread was chosen so that the robust CV is known: the log speedups are
``log(1.5) + d * k`` with ``k`` below, whose median is 0 and whose absolute deviations have median 1, so the robust CV
is exactly d times the normal-consistent MAD factor, 1 / Φ⁻¹(3/4)."""

from __future__ import annotations

import math
from datetime import date, timedelta
from statistics import NormalDist

import pytest

MAD_FACTOR = 1 / NormalDist().inv_cdf(0.75)  # 1.4826: the normal-consistent scale of a median absolute deviation
K = (0, 1, -1, 2, -2, 3, -3, 0.5, -0.5, 0, 1, -1, 4, -4)  # median 0; median |k| 1 (also of the first ten)
QUIET, LOUD = 0.002, 0.04  # d of each series
STEP_AT = 10  # "stepped": ten nights at QUIET spread, then four 20 % lower
NIGHTS = [(date(2026, 5, 1) + timedelta(days=n)).isoformat() for n in range(len(K))]


def _speedups(n: int) -> dict[str, float | None]:
    return {"quiet": 1.5 * math.exp(QUIET * K[n]), "loud": 1.5 * math.exp(LOUD * K[n]),
            "short": 1.2 if n >= len(K) - 3 else None,  # passes on the last three nights only
            "stepped": 1.5 * math.exp(QUIET * K[n]) * (0.8 if n >= STEP_AT else 1.0)}


@pytest.fixture
def noisy_history(client, session, upload, run_files, manifest) -> dict[str, int]:
    """Fourteen posted nights of one configuration, detected run by run as the post-ingest hook does; returns
    model name -> series id."""
    from service.detection.detector import detect_run

    for n, night in enumerate(NIGHTS):
        response = upload(run_files(_speedups(n), manifest=manifest(night=night, commit=f"c{n}")))
        assert response.status_code == 201, response.text
        detect_run(session, response.json()["runs"][0]["run_id"], incremental=True)
    latest = client.get("/api/v1/runs", params={"limit": 1}).json()[0]["id"]
    return {r["name"]: r["series_id"] for r in client.get(f"/api/v1/runs/{latest}").json()["results"]}


def _noise(answer: dict, metric: str = "speedup") -> dict:
    return next(n for n in answer["noise"] if n["metric"] == metric)


def test_the_history_carries_each_series_noise_and_detectable_change(client, noisy_history) -> None:
    from perfdash.noise import minimum_detectable_effect

    quiet = _noise(client.get(f"/api/v1/series/{noisy_history['quiet']}/history").json())
    assert quiet["runs"] == len(K) and quiet["basis"] == "history"  # no generated-code fingerprint in these runs
    assert quiet["robust_cv"] == pytest.approx(QUIET * MAD_FACTOR, rel=1e-3)  # the CSV keeps six digits
    assert quiet["minimum_detectable_effect"] == 0.05  # never below the policy's minimum effect
    assert quiet["catches_target"] is True

    loud = _noise(client.get(f"/api/v1/series/{noisy_history['loud']}/history").json())
    assert loud["robust_cv"] == pytest.approx(LOUD * MAD_FACTOR, rel=1e-3)  # the CSV keeps six digits
    expected = minimum_detectable_effect(LOUD * MAD_FACTOR, min_effect=0.05, p_value=1.5e-3, before=len(K))
    assert loud["minimum_detectable_effect"] == pytest.approx(expected, rel=1e-4)
    assert loud["minimum_detectable_effect"] > 0.15  # about 20 %: a 5 % regression passes unseen
    assert loud["catch_target"] == 0.05 and loud["catches_target"] is False
    # the constant latency of these files: no spread, so the policy's minimum effect
    latency = _noise(client.get(f"/api/v1/series/{noisy_history['loud']}/history").json(), "abs_latency")
    assert latency["robust_cv"] == 0 and latency["catches_target"] is True

    short = _noise(client.get(f"/api/v1/series/{noisy_history['short']}/history").json())
    assert short["runs"] == 3 and short["robust_cv"] is None and short["catches_target"] is None


def test_a_finding_says_how_far_beyond_its_series_noise_it_is(client, noisy_history) -> None:
    found = [f for f in client.get("/api/v1/findings", params={"series_id": noisy_history["stepped"]}).json()
             if f["metric"] == "speedup" and f["kind"] == "performance"]
    assert found, "the 20 % step was not found"
    finding = found[0]
    # the noise of the old level: the ten runs before the change point
    assert finding["noise"]["runs"] == STEP_AT
    assert finding["noise"]["robust_cv"] == pytest.approx(QUIET * MAD_FACTOR, rel=1e-3)  # the CSV keeps six digits
    expected = abs(math.log1p(finding["change_pct"] / 100)) / (QUIET * MAD_FACTOR)
    assert finding["sigmas_beyond"] == pytest.approx(expected)
    assert finding["sigmas_beyond"] > 50  # a 20 % step in 0.3 % noise
    one = client.get(f"/api/v1/findings/{finding['id']}").json()
    assert one["sigmas_beyond"] == finding["sigmas_beyond"]
    # a status finding has no noise
    status = client.get("/api/v1/findings", params={"series_id": noisy_history["short"]}).json()
    assert status and all(f["noise"] is None and f["sigmas_beyond"] is None for f in status)


def test_the_noise_endpoint_flags_the_series_that_cannot_catch_five_percent(client, noisy_history) -> None:
    every = {s["name"]: s for s in client.get("/api/v1/noise").json()}
    assert set(every) == set(noisy_history)
    flagged = client.get("/api/v1/noise", params={"cannot_catch": "true"}).json()
    # the loud series' speedup; the stepped one's window holds the step, and its noise is still small (MAD)
    assert [(s["name"], [n["metric"] for n in s["noise"]]) for s in flagged] == [("loud", ["speedup"])]
    assert flagged[0]["noise"][0]["robust_cv"] == pytest.approx(LOUD * MAD_FACTOR, rel=1e-3)  # the CSV keeps six digits
    assert client.get("/api/v1/noise", params={"suite": "huggingface"}).json() == []


def test_the_summarys_first_load_after_an_ingest_reads_no_window(client, session, noisy_history) -> None:
    # the upload's post-ingest hook read the new run's figures (service/app.py adds the app's cache's after_ingest)
    cache = client.app.state.noise_cache
    read = cache.windows_read
    assert read >= 1
    page = client.get("/")
    assert page.status_code == 200
    assert cache.windows_read == read  # the page computed no figures
    assert "1 series too noisy to catch a 5 % change" in page.text
    flagged = page.text.split('id="too-noisy-table"', 1)[1]
    assert 'data-name="loud"' in flagged and 'data-name="quiet"' not in flagged
    # what the page read from the cache is what a fresh read finds
    fresh = client.get("/api/v1/noise", params={"cannot_catch": "true"}).json()
    assert cache.windows_read == read
    from service.queries.noise import latest_noise

    assert [s.model_dump(mode="json") for s in latest_noise(session, cannot_catch=True)] == fresh


def test_the_policy_figures_are_detections() -> None:
    from service.detection.changepoint import DetectionConfig
    from service.queries.noise import ALERT_P_VALUE, NOISE_WINDOW

    assert ALERT_P_VALUE == DetectionConfig().p_value_max
    assert NOISE_WINDOW == DetectionConfig().window
