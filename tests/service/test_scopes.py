"""Token scopes and the audit log (issue 29): every write route requires its scope, a wrong scope is a 403 that
names it, and every write is in the audit log under the token's name."""

from __future__ import annotations

import re

import pytest
from fastapi.routing import APIRoute, iter_route_contexts

from service.models import AuditEntry, Run

WRITE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


def multipart(files: dict[str, bytes]) -> list:
    return [("files", (name, data, "text/csv")) for name, data in files.items()]


def _required_scopes(route: APIRoute) -> set[str]:
    found: set[str] = set()
    stack = list(route.dependant.dependencies)
    while stack:
        dependant = stack.pop()
        scope = getattr(dependant.call, "required_scope", None)
        if scope is not None:
            found.add(str(scope))
        stack.extend(dependant.dependencies)
    return found


def _write_routes(app) -> list[tuple[str, str, str]]:
    """(method, path with every parameter 1, scope) of every write route of the app."""
    routes = []
    for context in iter_route_contexts(app.routes):  # routers included in the app are walked into
        methods = set(context.methods or ()) & WRITE_METHODS
        if not methods:
            continue
        route = context.original_route
        assert isinstance(route, APIRoute), f"{context.path}: a write route outside FastAPI's routing has no scope"
        scopes = _required_scopes(route)
        assert len(scopes) == 1, f"{sorted(methods)} {context.path}: needs exactly one scope, has {sorted(scopes)}"
        path = re.sub(r"\{[^}]+\}", "1", context.path)
        routes += [(method, path, scopes.pop()) for method in sorted(methods)]
    return routes


def test_every_write_route_has_the_scope_of_its_kind(client) -> None:
    expected = {("POST", "/api/v1/runs"): "ingest", ("DELETE", "/api/v1/runs/1"): "admin",
                ("POST", "/api/v1/annotations"): "admin", ("POST", "/api/v1/findings/1/acknowledge"): "admin",
                ("POST", "/api/v1/bisections"): "bisect", ("POST", "/api/v1/bisections/1/result"): "bisect"}
    routes = {(method, path): scope for method, path, scope in _write_routes(client.app)}
    assert routes == expected


def test_a_token_without_the_scope_is_refused_on_every_write_route(client, session, tokens) -> None:
    """Enumerates the app's routes: a write route added without a scope fails here (and in the test above)."""
    routes = _write_routes(client.app)
    assert routes
    legacy = {token: {"ingest"} for token in tokens["legacy"]}
    named = {token: {scope} for scope, token in tokens["scoped"].items()}
    before = session.query(AuditEntry).count()
    refusals = 0
    for method, path, scope in routes:
        for token, scopes in {**legacy, **named}.items():
            if scope in scopes:
                continue
            response = client.request(method, path, headers={"Authorization": f"Bearer {token}"})
            assert response.status_code == 403, (method, path, token, response.text)
            assert f"'{scope}'" in response.json()["detail"], response.text
            refusals += 1
        for headers in ({}, {"Authorization": "Bearer not-a-token-of-this-service"}):
            response = client.request(method, path, headers=headers)
            assert response.status_code == 401, (method, path, response.text)
            refusals += 1
        # the right scope gets past the check (what follows is the route's own answer: 404, 422, ...)
        allowed = tokens["scoped"][scope]
        response = client.request(method, path, headers={"Authorization": f"Bearer {allowed}"})
        assert response.status_code not in (401, 403), (method, path, response.text)
    # every refused attempt is in the log, refused and without the secret it presented; a failed request is no write
    entries = session.query(AuditEntry).order_by(AuditEntry.id).all()[before:]
    assert len(entries) == refusals and {e.outcome for e in entries} == {"refused"}
    stored = " ".join(f"{e.token_name} {e.action} {e.target} {e.detail}" for e in entries)
    assert "not-a-token-of-this-service" not in stored
    assert not any(token in stored for token in (*tokens["legacy"], *tokens["scoped"].values()))
    assert {e.token_name for e in entries} >= {"(no token)", "(unknown token)", "ingest-1", "test-ingest"}
    assert {e.detail.split(":", 1)[0] for e in entries} == {"401", "403"}


def test_an_ingest_token_never_deletes_a_run(client, session, run_files, tokens) -> None:
    SCOPED, TOKENS = tokens["scoped"], tokens["legacy"]
    created = client.post("/api/v1/runs", files=multipart(run_files({"resnet18": 1.2})),
                          data={"machine": "Test Xeon", "commit": "c0ffee"},
                          headers={"Authorization": f"Bearer {SCOPED['ingest']}"})
    assert created.status_code == 201, created.text
    run_id = created.json()["runs"][0]["run_id"]
    for token in (*TOKENS, SCOPED["ingest"], SCOPED["bisect"]):
        response = client.delete(f"/api/v1/runs/{run_id}", headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 403
        assert "lacks the scope 'admin'" in response.json()["detail"]
    assert session.get(Run, run_id) is not None
    assert client.delete(f"/api/v1/runs/{run_id}",
                         headers={"Authorization": f"Bearer {SCOPED['admin']}"}).status_code == 204
    assert session.get(Run, run_id) is None


def test_the_audit_log_shows_every_write_with_its_token_name(client, session, run_files, tokens) -> None:
    SCOPED, OPERATOR = tokens["scoped"], tokens["operator"]

    def as_(token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    created = client.post("/api/v1/runs", files=multipart(run_files({"resnet18": 1.2})),
                          data={"machine": "Test Xeon", "commit": "c0ffee"}, headers=as_("token-one"))
    run = created.json()["runs"][0]
    note = client.post("/api/v1/annotations", json={"text": "new suite pin", "configuration_id": 999_999},
                       headers=as_(SCOPED["admin"]))
    assert note.status_code == 404  # failed: not a write
    night = client.get(f"/api/v1/runs/{run['run_id']}").json()["night"]
    assert client.post("/api/v1/annotations", json={"text": "new suite pin", "night": night},
                       headers=as_(SCOPED["admin"])).status_code == 201
    assert client.delete(f"/api/v1/runs/{run['run_id']}", headers=as_(OPERATOR)).status_code == 204

    log = client.get("/api/v1/audit", headers=as_(SCOPED["admin"])).json()
    assert [(e["token_name"], e["scope"], e["action"], e["target"]) for e in log[:3]] == [
        ("test-operator", "admin", "DELETE /api/v1/runs/{run_id}", f"run_id={run['run_id']}"),
        ("test-admin", "admin", "POST /api/v1/annotations", ""),
        ("ingest-1", "ingest", "POST /api/v1/runs", ""),
    ]
    assert log[2]["detail"] == f"run {run['run_id']} stored ({run['suite']} {run['backend']}, 1 models)"
    # what a deletion lost: the configuration, night, commit and what went with the run
    deleted = log[0]["detail"]
    assert deleted.startswith(f"deleted run {run['run_id']}: configuration ")
    assert "(timm_models inductor default float32 inference cpu " in deleted and f"night {night}" in deleted
    assert "commit c0ffee" in deleted and deleted.endswith("1 results, 0 findings, 0 change points")
    assert [e["token_name"] for e in client.get("/api/v1/audit", params={"token_name": "test-admin"},
                                                headers=as_(SCOPED["admin"])).json()] == ["test-admin"]
    assert session.query(AuditEntry).count() >= 3

    # not on the runs page, which anyone reads (another run keeps the page from being the empty one)
    client.post("/api/v1/runs", files=multipart(run_files({"resnet18": 1.3})),
                data={"machine": "Test Xeon", "commit": "c0ffee2"}, headers=as_(SCOPED["ingest"]))
    page = client.get("/runs").text
    assert 'id="audit"' not in page and "test-operator" not in page and "/api/v1/audit" in page


def test_reading_the_audit_log_takes_an_admin_token(client, session, tokens) -> None:
    SCOPED = tokens["scoped"]
    assert client.get("/api/v1/audit").status_code == 401
    for token in (*tokens["legacy"], SCOPED["ingest"], SCOPED["bisect"]):
        response = client.get("/api/v1/audit", headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 403 and "'admin'" in response.json()["detail"]
    log = client.get("/api/v1/audit", params={"outcome": "refused"},
                     headers={"Authorization": f"Bearer {SCOPED['admin']}"})
    assert log.status_code == 200
    assert [(e["token_name"], e["action"], e["outcome"]) for e in log.json()[-2:]] == [
        ("ingest-1", "GET /api/v1/audit", "refused"), ("(no token)", "GET /api/v1/audit", "refused")]
    assert all(e["outcome"] == "refused" for e in log.json())


@pytest.mark.parametrize("tokens", [
    '[{"name": "a", "scopes": ["admin"], "token": "short"}]',
    '[{"name": "a", "scopes": [], "token": "0123456789abcdefgh"}]',
    '[{"name": "a", "scopes": ["root"], "token": "0123456789abcdefgh"}]',
    '[{"name": "a", "scopes": ["admin"], "token": "0123456789abcdefgh"}, '
    '{"name": "a", "scopes": ["ingest"], "token": "0123456789abcdefgX"}]',
    '[{"name": "a", "scopes": ["admin"], "token": "0123456789abcdefgh"}, '
    '{"name": "b", "scopes": ["ingest"], "token": "0123456789abcdefgh"}]',
    "not json"])
def test_badly_configured_tokens_are_refused_at_startup(tokens: str) -> None:
    from pydantic import ValidationError

    from service.settings import Settings

    with pytest.raises(ValidationError) as raised:
        Settings(tokens=tokens)
    assert "0123456789abcdefgh" not in str(raised.value.errors(include_input=False))

