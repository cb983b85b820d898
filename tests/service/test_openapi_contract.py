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
