"""The API says what it answers (issue 29; bench/contract.py runs schemathesis with every check against it): error
answers documented with their body, typed filter parameters, ISO dates only, the Allow header of every method."""

from __future__ import annotations

import pytest


def test_every_operation_documents_its_error_answers(client) -> None:
    schema = client.get("/openapi.json").json()
    assert schema["components"]["schemas"]["Error"]["required"] == ["detail"]
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            responses = operation["responses"]
            for code in ("400", "422", "503", *(("404",) if "{" in path else ()),
                         *(("401", "403", "413") if method in ("post", "delete") else ())):
                assert code in responses, (method, path, code)
                assert responses[code]["content"]["application/json"]["schema"] == {
                    "$ref": "#/components/schemas/Error"}, (method, path, code)


def test_filter_parameters_have_their_types(client) -> None:
    parameters = {p["name"]: p["schema"] for p in client.get("/openapi.json").json()["paths"]["/api/v1/runs"]["get"]
                  ["parameters"]}
    assert {"type": "integer"} in parameters["world_size"]["anyOf"]
    assert {"type": "boolean"} in parameters["dynamic_shapes"]["anyOf"]
    assert client.get("/api/v1/runs", params={"world_size": "two"}).status_code == 422
    assert client.get("/api/v1/runs", params={"dynamic_shapes": "maybe"}).status_code == 422
    # a form's "any" is empty, and is no filter
    assert client.get("/api/v1/runs", params={"world_size": "", "dynamic_shapes": ""}).status_code == 200
    assert client.get("/api/v1/runs", params={"world_size": "2", "dynamic_shapes": "false"}).status_code == 200


@pytest.mark.parametrize("value", ["0", "1700000000", "2026-1-2", "2026-01-02T00:00:00"])
def test_dates_are_iso_dates_only(client, value: str) -> None:
    assert client.get("/api/v1/runs", params={"until": value}).status_code == 422
    assert client.get("/api/v1/annotations", params={"since": value}).status_code == 422
    assert client.get("/api/v1/runs", params={"until": "2026-01-02"}).status_code == 200


def test_a_wrong_method_lists_every_method_of_the_path(client) -> None:
    for path, methods in (("/api/v1/runs/1", {"GET", "DELETE"}), ("/api/v1/annotations", {"GET", "POST"}),
                          ("/api/v1/bisections", {"GET", "POST"})):
        response = client.options(path)
        assert response.status_code == 405
        assert methods <= {m.strip() for m in response.headers["allow"].split(",")} <= methods | {"HEAD"}


# POST /api/v1/runs as its schema says (the last failures bench/contract.py's schemathesis found): a JSON body of the
# wrong type is refused, naming the field; what the schema allows is accepted; a refused upload stores nothing.


def _stored(session) -> tuple[int, int, int]:
    import sqlalchemy as sa

    from service.models import Machine, Result, Run

    return tuple(session.scalar(sa.select(sa.func.count()).select_from(m)) for m in (Run, Result, Machine))


def _body(manifest, **changes) -> dict:
    import json

    meta = json.loads(manifest().model_dump_json())
    meta.update(changes)
    return {"manifest": meta, "results": [{"name": "resnet18", "accuracy": "pass", "speedup": 1.2}]}


@pytest.mark.parametrize(("field", "value"), [
    ("schema_version", False), ("schema_version", True), ("schema_version", "1"), ("schema_version", 1.5),
    ("schema_version", 2), ("schema_version", 0),
    ("end_time", 0), ("end_time", 1700000000), ("end_time", "1700000000"), ("end_time", "0"),
    ("end_time", "2026-01-02"), ("end_time", "2026-01-02T02:00:00"), ("start_time", True),
    ("start_time", "2026-02-30T01:00:00Z"),
])
def test_a_mistyped_manifest_field_is_refused_by_name(client, auth, session, manifest, field, value) -> None:
    before = _stored(session)
    response = client.post("/api/v1/runs", json=_body(manifest, **{field: value}), headers=auth)
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"][:2] == ["manifest", field]
    assert _stored(session) == before


@pytest.mark.parametrize(("where", "value"), [
    ("threads", True), ("threads", "4"), ("world_size", 2.5), ("dynamic_shapes", 1), ("dynamic_shapes", "true"),
])
def test_mistyped_configuration_fields_are_refused(client, auth, session, manifest, where, value) -> None:
    body = _body(manifest)
    body["manifest"]["config"][where] = value
    response = client.post("/api/v1/runs", json=body, headers=auth)
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"][:3] == ["manifest", "config", where]
    assert _stored(session) == (0, 0, 0)


@pytest.mark.parametrize(("field", "value"), [("speedup", True), ("speedup", "1.5"), ("batch_size", 8.5),
                                              ("batch_size", False), ("eager_ms", [True])])
def test_a_mistyped_result_field_is_refused(client, auth, session, manifest, field, value) -> None:
    body = _body(manifest)
    body["results"][0][field] = value
    response = client.post("/api/v1/runs", json=body, headers=auth)
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"][:3] == ["results", 0, field]
    assert _stored(session) == (0, 0, 0)


def test_a_manifest_file_with_a_boolean_version_names_the_field(upload, session, run_files, manifest) -> None:
    import json

    files = run_files({"resnet18": 1.2}, manifest=manifest())
    name = next(n for n in files if n.endswith("_manifest.json"))
    for version, said in ((False, "must be an integer, got false"), ([1], "must be an integer, got [1]")):
        files[name] = json.dumps({**json.loads(files[name]), "schema_version": version}).encode()
        response = upload(files)
        assert response.status_code == 422, response.text
        assert response.json()["detail"]["file"] == name
        assert f"schema_version {said}" in response.json()["detail"]["message"]
    files[name] = json.dumps({**json.loads(files[name]), "schema_version": 1, "end_time": 0}).encode()
    response = upload(files)
    assert response.status_code == 422 and "end_time" in response.json()["detail"]["message"]
    assert _stored(session) == (0, 0, 0)


def test_an_unknown_manifest_field_is_ignored_as_the_schema_allows(client, auth, session, manifest) -> None:
    """The published Manifest schema allows other properties (fields were added without a new schema_version);
    an ignored field is no part of the content hash, so the same run with another one is already stored."""
    schema = client.get("/openapi.json").json()["components"]["schemas"]
    assert schema["Manifest"].get("additionalProperties", True) is not False
    assert schema["ResultPayload"]["additionalProperties"] is False
    first = client.post("/api/v1/runs", json=_body(manifest, added_later={"x": 1}), headers=auth)
    assert first.status_code == 201, first.text
    again = client.post("/api/v1/runs", json=_body(manifest, other_field="y"), headers=auth)
    assert again.status_code == 200 and again.json()["runs"][0]["run_id"] == first.json()["runs"][0]["run_id"]
    assert _stored(session)[0] == 1


def test_the_multipart_schema_is_closed_and_the_service_keeps_to_it(client, auth, session, run_files) -> None:
    from service.api.runs import FORM_PARTS

    form = client.get("/openapi.json").json()["paths"]["/api/v1/runs"]["post"]["requestBody"]["content"][
        "multipart/form-data"]["schema"]
    assert form["additionalProperties"] is False and set(form["properties"]) == FORM_PARTS
    assert form["properties"]["files"]["minItems"] == 1
    files = [("files", (n, d, "text/csv")) for n, d in run_files({"resnet18": 1.2}).items()]
    response = client.post("/api/v1/runs", files=files, data={"machine": "Xeon", "timestmap": "2026-01-02"},
                           headers=auth)
    assert response.status_code == 422
    assert response.json()["detail"].startswith("unknown part 'timestmap' in the upload")
    # no file part at all: the schema's minItems
    response = client.post("/api/v1/runs", files=[("x", (None, b"{}"))], headers=auth)
    assert response.status_code == 422 and "unknown part 'x'" in response.json()["detail"]
    assert _stored(session) == (0, 0, 0)
    # the timestamp the form documents: RFC 3339; without an offset (older clients) UTC; anything else refused
    for value in ("0", "1700000000", "2026-01-02"):
        response = client.post("/api/v1/runs", files=files, data={"machine": "Xeon", "timestamp": value},
                               headers=auth)
        assert response.status_code == 422 and response.json()["detail"].startswith("timestamp: "), value
    assert _stored(session) == (0, 0, 0)
    response = client.post("/api/v1/runs", files=files, data={"machine": "Xeon", "timestamp": "2026-01-02T01:00:00"},
                           headers=auth)
    assert response.status_code == 201, response.text


def test_a_file_that_is_no_result_is_refused_by_name_when_nothing_else_came(client, auth, session, run_files) -> None:
    """The schema cannot say what a result file is (its name and content): it says so, and the refusal is a file
    fault that names the part (bench/contract_hooks.py expects exactly this shape)."""
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(32))
    response = client.post("/api/v1/runs", files=[("files", ("files.png", png, "image/png"))], headers=auth)
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert set(detail) == {"message", "file", "line", "column", "error"}
    assert "files.png (not a result file)" in detail["message"]
    assert _stored(session) == (0, 0, 0)
    # beside result files it is skipped with a notice
    files = [("files", (n, d, "text/csv")) for n, d in run_files({"resnet18": 1.2}).items()]
    response = client.post("/api/v1/runs", files=[*files, ("files", ("files.png", png, "image/png"))],
                           data={"machine": "Xeon"}, headers=auth)
    assert response.status_code == 201, response.text
    assert any("files.png" in notice for notice in response.json()["notices"])


def test_body_schemas_say_no_nul_where_the_service_refuses_one(client, auth, session, manifest) -> None:
    from service.api.contract import NO_NUL

    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    assert schemas["ResultPayload"]["properties"]["name"]["pattern"] == NO_NUL
    assert schemas["MachineInfo"]["properties"]["host"]["pattern"] == NO_NUL
    assert schemas["RunConfig"]["properties"]["env"]["propertyNames"] == {"pattern": NO_NUL}
    assert schemas["RunConfig"]["properties"]["variant"]["pattern"] != NO_NUL  # its own pattern stays
    assert schemas["BisectionIn"]["properties"]["suite"]["anyOf"][0]["pattern"] == NO_NUL
    body = _body(manifest)
    body["results"][0]["name"] = "res\x00net"
    assert client.post("/api/v1/runs", json=body, headers=auth).status_code == 422
    assert _stored(session) == (0, 0, 0)


def test_an_integer_with_a_zero_fraction_is_an_integer_as_json_schema_says(client, auth, session, manifest) -> None:
    body = _body(manifest)
    body["manifest"]["config"]["threads"] = 2.0
    body["results"][0]["batch_size"] = 8.0
    response = client.post("/api/v1/runs", json=body, headers=auth)
    assert response.status_code == 201, response.text
    assert _stored(session)[:2] == (1, 1)
    # and the bounds the models check are the document's minimum and maximum
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    assert {"type": "integer", "minimum": 1, "maximum": 1_000_000} in schemas["RunConfig"]["properties"]["threads"][
        "anyOf"]
    assert schemas["Manifest"]["properties"]["schema_version"]["maximum"] == 1  # a newer manifest is refused
    assert schemas["ResultPayload"]["properties"]["batch_size"]["minimum"] == 0
    for name in ("MachineInfo", "RunConfig", "ResultPayload"):
        for field, spec in schemas[name]["properties"].items():
            for option in spec.get("anyOf", [spec]):
                assert not {"ge", "le", "gt", "lt"} & option.keys(), (name, field)


@pytest.mark.parametrize(("field", "value"), [("speedup", -1.0), ("abs_latency", -1e-5), ("eager_peak_mem", -2.0),
                                              ("eager_ms", [1.0, 0.0]), ("eager_activation_peak_mem", -1.0)])
def test_a_negative_measurement_is_refused_where_the_schema_says_so(client, auth, session, manifest, field,
                                                                    value) -> None:
    body = _body(manifest)
    body["results"][0].update({field: value, "compiled_ms": [1.0, 1.0]} if field == "eager_ms" else {field: value})
    response = client.post("/api/v1/runs", json=body, headers=auth)
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"][:3] == ["results", 0, field]
    properties = client.get("/openapi.json").json()["components"]["schemas"]["ResultPayload"]["properties"]
    option = properties[field]["anyOf"][0]
    assert option.get("minimum") == 0 or option.get("items", {}).get("exclusiveMinimum") == 0
    assert _stored(session) == (0, 0, 0)



def test_the_noise_fields_are_documented(client) -> None:
    """Issue 39: the history, the findings and /api/v1/noise carry each series' noise and detectable change."""
    schema = client.get("/openapi.json").json()
    schemas = schema["components"]["schemas"]
    assert {"robust_cv", "minimum_detectable_effect", "runs", "basis", "catch_target", "catches_target"} \
        <= set(schemas["NoiseOut"]["properties"])
    assert schemas["ModelHistory"]["properties"]["noise"]["items"] == {"$ref": "#/components/schemas/NoiseOut"}
    assert {"noise", "sigmas_beyond"} <= set(schemas["FindingOut"]["properties"])
    answer = schema["paths"]["/api/v1/noise"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert answer["items"] == {"$ref": "#/components/schemas/SeriesNoiseOut"}
    assert client.get("/api/v1/noise", params={"cannot_catch": "maybe"}).status_code == 422
