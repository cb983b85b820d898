"""schemathesis hooks of bench/contract.py: schemathesis' ``positive_data_acceptance`` with the one refusal of a
schema-valid request that the OpenAPI document names but cannot describe in JSON Schema.

A multipart ``POST /api/v1/runs`` carries result files: what makes a file a result file is its name and content (the
result contract, perfdash/contract.py), which no schema of a binary part can say. The document says so (the ``files``
description and the 422 answer), and the service answers such an upload with a file fault: a 422 whose detail names
the file (``message``, ``file``, ``line``, ``column``, ``error``; service/app.py's ContractError handler). That answer,
to that operation, for a multipart body, is expected here; every other refusal of a schema-valid request, of this
operation's JSON body and of every other operation, still fails the check.

bench/contract.py runs schemathesis with ``--checks all --exclude-checks positive_data_acceptance`` and this file as
its hooks, so this check takes the built-in one's place (tests/service/test_openapi_contract.py pins the answer's
shape).
"""

from __future__ import annotations

import json

import schemathesis
from schemathesis.specs.openapi.checks import RejectedPositiveData, positive_data_acceptance

FILE_FAULT_KEYS = frozenset({"message", "file", "line", "column", "error"})


def is_file_fault(method: str, path: str, media_type: str | None, status: int, body: bytes) -> bool:
    """Whether an answer is the documented refusal of an upload's result files."""
    if (method.upper(), path, status) != ("POST", "/api/v1/runs", 422):
        return False
    if not (media_type or "").startswith("multipart/form-data"):
        return False
    try:
        detail = json.loads(body).get("detail")
    except (ValueError, AttributeError):
        return False
    return isinstance(detail, dict) and set(detail) == FILE_FAULT_KEYS


@schemathesis.check
def positive_data_acceptance_but_file_faults(ctx, response, case):
    """positive_data_acceptance, except for an upload refused for its files' names or content (see above)."""
    try:
        return positive_data_acceptance(ctx, response, case)
    except RejectedPositiveData:
        if is_file_fault(case.operation.method, case.operation.path, case.media_type, response.status_code,
                         response.content):
            return None
        raise
