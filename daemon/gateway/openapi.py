"""The gateway's OpenAPI 3.1 document (served at ``/openapi.json``)."""

from __future__ import annotations

from typing import Any

from everlast.daemon.gateway.schema import MAX_ID_CHARS, MAX_X


def document(max_queries: int, max_body_bytes: int, timeout_s: float) -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {"title": "everlast gateway", "version": "1",
                 "description": "Private everlasting prediction over HTTP: each query gets exactly one label "
                                "record, returned only to the client whose credential sent it."},
        "components": {
            "securitySchemes": {"apiKey": {"type": "http", "scheme": "bearer",
                                           "description": "an API key the operator issued"},
                                "clientCertificate": {"type": "mutualTLS"}},
            "schemas": _schemas(max_queries),
        },
        "security": [{"apiKey": []}, {"clientCertificate": []}],
        "paths": _paths(max_body_bytes, timeout_s),
    }


def _schemas(max_queries: int) -> dict[str, Any]:
    qid = {"oneOf": [{"type": "string", "minLength": 1, "maxLength": MAX_ID_CHARS},
                     {"type": "integer", "minimum": -(2**63), "maximum": 2**63 - 1}],
           "description": "the client's query id, unique per client: a replayed id returns the label first "
                          "published for it"}
    query = {"type": "object", "required": ["id", "x"], "additionalProperties": False,
             "properties": {"id": qid,
                            "x": {"oneOf": [{"type": "number"},
                                            {"type": "array", "items": {"type": "number"}, "minItems": 1,
                                             "maxItems": MAX_X}],
                                  "description": "the point: finite numbers, the model's dimension"},
                            "client": {"description": "ignored: the client is the credential's"}}}
    label = {"type": "object", "required": ["id", "label", "status", "round"],
             "properties": {"id": qid, "label": {"type": ["integer", "null"], "enum": [0, 1, None]},
                            "status": {"type": "string", "enum": ["ok", "refused", "invalid"]},
                            "round": {"type": "integer"},
                            "reason": {"type": "string", "description": "why (status is not ok); a client "
                                                                         "quota's begins with client-quota:"}}}
    error = {"type": "object", "properties": {"error": {
        "type": "object", "required": ["code", "field", "message"],
        "properties": {"code": {"type": "string"}, "field": {"type": "string", "description": "a JSON path, "
                                                                                              "e.g. queries[3].x"},
                       "message": {"type": "string"}}}}}

    batch = {"type": "object", "required": ["queries"], "additionalProperties": False,
             "properties": {"queries": {"type": "array", "minItems": 1, "maxItems": max_queries,
                                        "items": {"$ref": "#/components/schemas/Query"}},
                            "client": {"description": "ignored"}}}
    return {"Query": query, "Label": label, "Error": error, "Batch": batch}


def _err(desc: str) -> dict[str, Any]:
    ref = {"$ref": "#/components/schemas/Error"}
    return {"description": desc, "content": {"application/json": {"schema": ref}}}


def _paths(max_body_bytes: int, timeout_s: float) -> dict[str, Any]:
    return {
        "/v1/models/{model}/predict": {"post": {
            "summary": "Label one query or a batch",
            "parameters": [{"name": "model", "in": "path", "required": True, "schema": {"type": "string"}}],
            "requestBody": {"required": True, "description": f"JSON, at most {max_body_bytes} bytes",
                            "content": {"application/json": {"schema": {"oneOf": [
                                {"$ref": "#/components/schemas/Query"}, {"$ref": "#/components/schemas/Batch"}]}}}},
            "responses": {
                "200": {"description": "the label records, in the order of the queries (one query: its record)",
                        "content": {"application/json": {"schema": {"oneOf": [
                            {"$ref": "#/components/schemas/Label"},
                            {"type": "object", "properties": {"model": {"type": "string"}, "labels": {
                                "type": "array", "items": {"$ref": "#/components/schemas/Label"}}}}]}}}},
                "400": _err("the body is not JSON"),
                "401": _err("no credential, or one that is unknown or revoked: nothing produced"),
                "404": _err("no model with this id is served"),
                "413": _err("the body or its query count is over the limit"),
                "415": _err("the content type is not application/json"),
                "422": _err("a field breaks the schema (named in error.field): nothing produced"),
                "429": _err("the client's rate or in-flight limit: retry after Retry-After seconds"),
                "503": _err("the broker or the daemon is unreachable: nothing accepted; retry after Retry-After"),
                "504": _err(f"no label within {timeout_s:g} s: the queries are accepted; retry with the same ids "
                            "to receive their labels"),
            }}},
        "/v2/models/{model}/infer": {"post": {
            "summary": "The Open Inference Protocol's v2 REST inference: one input tensor of n rows (n queries); "
                       "the request id is required (row i is the query v2/<id>/<i>)",
            "parameters": [{"name": "model", "in": "path", "required": True, "schema": {"type": "string"}}],
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "object", "required": ["id", "inputs"],
                "properties": {"id": {"type": "string", "minLength": 1, "maxLength": 128},
                               "inputs": {"type": "array", "minItems": 1, "maxItems": 1}}}}}},
            "responses": {"200": {"description": "outputs label (INT8, -1: none), status, round, reason"},
                          "504": {"description": "some rows pending: repeat the request with the same id"}}}},
        "/healthz": {"get": {"summary": "the process is alive", "security": [],
                             "responses": {"200": {"description": "alive"}}}},
        "/readyz": {"get": {"summary": "the broker, a daemon and the labels index are ready", "security": [],
                            "responses": {"200": {"description": "ready"}, "503": {"description": "not ready"}}}},
        "/openapi.json": {"get": {"summary": "this document", "security": [],
                                  "responses": {"200": {"description": "OpenAPI 3.1"}}}},
    }
