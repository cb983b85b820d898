"""Runs, not calendar nights: two runs of one configuration on one day are two points of every history; a summary
shows the one that started last and compares it with the earlier; every endpoint takes the same filter model."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest


@pytest.fixture
def same_day(upload, run_files, manifest):
    """Night 2026-03-01 once, then 2026-03-02 twice (04:00 and 01:00), the later start uploaded FIRST (so it has
    the smaller id). Returns the run ids by name."""
    night = manifest(night="2026-03-01", commit="aaa")
    morning = manifest(night="2026-03-02", commit="bbb")
    later = morning.model_copy(update={"start_time": morning.start_time + timedelta(hours=3),
                                       "torch_git_commit": "ccc"})
    ids = {}
    for name, m, speedup in (("night", night, 1.1), ("later", later, 1.6), ("morning", morning, 1.3)):
        response = upload(run_files({"a": speedup, "b": 2.0}, manifest=m))
        assert response.status_code == 201, response.text
        ids[name] = response.json()["runs"][0]["run_id"]
    assert ids["later"] < ids["morning"]
    return ids


def test_both_runs_of_a_day_are_stored_and_listed_newest_start_first(client, same_day):
    listed = [r["id"] for r in client.get("/api/v1/runs").json()]
    assert listed == [same_day["later"], same_day["morning"], same_day["night"]]


def test_the_runs_list_pages_by_the_last_run_of_a_page_in_the_same_order(client, same_day):
    # keyset pagination (issue 31): the run order, start time within a night, not the id
    pages, after = [], None
    for _ in range(5):  # three runs: a fourth page is empty
        page = client.get("/api/v1/runs", params={"limit": 1, **({"after": after} if after else {})}).json()
        if not page:
            break
        pages.append(page[0]["id"])
        after = page[-1]["id"]
    assert pages == [same_day["later"], same_day["morning"], same_day["night"]]
    assert [r["id"] for r in client.get("/api/v1/runs", params={"after": same_day["later"]}).json()] == pages[1:]
    assert client.get("/api/v1/runs", params={"after": 2**31 - 1}).status_code == 404


def test_both_runs_of_a_day_are_points_of_the_model_history(client, same_day):
    (series,) = client.get("/api/v1/series", params={"name": "a"}).json()
    points = client.get(f"/api/v1/series/{series['id']}/history").json()["points"]
    assert [(p["run_id"], p["night"], p["speedup"]) for p in points] == [
        (same_day["night"], "2026-03-01", 1.1), (same_day["morning"], "2026-03-02", 1.3),
        (same_day["later"], "2026-03-02", 1.6)]
    suite = client.get(f"/api/v1/configurations/{series['configuration']['id']}/history").json()["points"]
    assert [p["run_id"] for p in suite] == [same_day["night"], same_day["morning"], same_day["later"]]


def test_the_summary_shows_the_run_that_started_last_against_the_earlier_one(client, same_day):
    (row,) = client.get("/api/v1/summary").json()["rows"]
    assert row["run"]["id"] == same_day["later"]
    assert row["previous"]["id"] == same_day["morning"]  # the previous run, not the previous night
    (morning,) = client.get(f"/api/v1/summary/runs/{same_day['morning']}").json()["rows"]
    assert morning["previous"]["id"] == same_day["night"]


def test_the_home_page_compares_the_latest_run_with_the_previous_run(session, same_day):
    from service.queries.summary import latest_runs_with_base

    ((latest, base),) = latest_runs_with_base(session)
    assert (latest.id, base.id) == (same_day["later"], same_day["morning"])


def test_trend_axis_gives_a_second_run_of_a_night_its_own_slot():
    from datetime import date

    from service.web.views import run_slots

    d1, d2 = date(2026, 3, 1), date(2026, 3, 2)
    labels, slot = run_slots([(1, d1, 10), (2, d1, 11), (1, d2, 12), (1, d2, 14), (2, d2, 13)])
    assert labels == ["2026-03-01", "2026-03-02", "2026-03-02 #2"]
    assert slot == {10: 0, 11: 0, 12: 1, 13: 1, 14: 2}


FILTERED_ENDPOINTS = ("/api/v1/runs", "/api/v1/summary", "/api/v1/series", "/api/v1/configurations",
                      "/api/v1/compare/commits")


def test_every_filtered_endpoint_takes_every_field_of_the_filter_model(client):
    from service.queries.filters import ConfigFilter

    fields = {f.name for f in dataclasses.fields(ConfigFilter)}
    paths = client.get("/openapi.json").json()["paths"]
    for endpoint in FILTERED_ENDPOINTS:
        params = {p["name"] for p in paths[endpoint]["get"]["parameters"]}
        assert fields <= params, (endpoint, fields - params)


def test_a_filter_field_an_endpoint_used_to_drop_now_filters(client, upload, run_files, manifest):
    upload(run_files({"a": 1.2}, manifest=manifest(compile_mode="max-autotune")))
    upload(run_files({"a": 1.2}, manifest=manifest()))
    chosen = client.get("/api/v1/configurations", params={"compile_mode": "max-autotune"}).json()
    assert [c["compile_mode"] for c in chosen] == ["max-autotune"]
    # an empty value (a form's "any") is no filter; a configuration id that is not a number is a clear 422
    assert len(client.get("/api/v1/configurations", params={"compile_mode": ""}).json()) == 2
    bad = client.get("/api/v1/runs", params={"configuration_id": "x"})
    assert bad.status_code == 422 and "configuration_id" in bad.text
