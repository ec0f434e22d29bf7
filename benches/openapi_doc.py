#!/usr/bin/env python3
"""Writes a large OpenAPI 3.0 document for the `idem-check discover` benchmark (BENCHMARKS.md).

Shaped like the largest published payments descriptions: OPERATIONS operations (half of them
POSTs that take Idempotency-Key through one shared $ref'd parameter, referenced hundreds of
times), two shared header parameters on every operation, one request and one response schema
per resource with long descriptions, nested objects, allOf/oneOf, enums and formats. The output
is deterministic.

    python3 benches/openapi_doc.py OUT.json [--operations 500]
"""

import argparse
import json

PROSE = (
    "This field is described at length, as real descriptions are: what it means, when it "
    "is set, how it changes over the life of the object, and which API versions return it. "
)


def field(i, kind):
    desc = PROSE * (1 + i % 3)
    if kind == 0:
        return {"type": "string", "description": desc, "maxLength": 5000}
    if kind == 1:
        return {"type": "integer", "minimum": 0, "description": desc}
    if kind == 2:
        return {"type": "string", "enum": ["pending", "succeeded", "failed"], "description": desc}
    if kind == 3:
        return {"type": "string", "format": "date-time", "description": desc}
    return {
        "type": "object",
        "description": desc,
        "properties": {
            "line1": {"type": "string", "description": desc},
            "city": {"type": "string", "description": desc},
            "country": {"type": "string", "pattern": "^[A-Z]{2}$", "description": desc},
        },
    }


def schema(n, fields):
    props = {f"field_{n}_{i}": field(i, i % 5) for i in range(fields)}
    return {
        "type": "object",
        "description": PROSE * 2,
        "required": [f"field_{n}_{i}" for i in range(0, fields, 4)],
        "properties": props,
    }


def document(operations):
    resources = operations // 2
    paths = {}
    schemas = {"Metadata": {"type": "object", "additionalProperties": {"type": "string"}}}
    for n in range(resources):
        schemas[f"Resource{n}"] = schema(n, 33)
        schemas[f"Create{n}"] = {
            "allOf": [
                {"$ref": f"#/components/schemas/Resource{n}"},
                {"type": "object", "properties": {"metadata": {"$ref": "#/components/schemas/Metadata"}}},
            ],
            "oneOf": [
                {"type": "object", "properties": {"card": {"type": "string", "format": "uuid"}}},
                {"type": "object", "properties": {"bank": {"type": "string"}}},
            ],
        }
        common = [
            {"$ref": "#/components/parameters/ApiVersion"},
            {"$ref": "#/components/parameters/Account"},
        ]
        response = {
            "description": PROSE,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/Resource{n}"}}},
        }
        paths[f"/v1/resource_{n}"] = {
            "post": {
                "operationId": f"PostResource{n}",
                "description": PROSE * 3,
                "parameters": common + [{"$ref": "#/components/parameters/IdempotencyKey"}],
                "requestBody": {
                    "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/Create{n}"}}}
                },
                "responses": {"200": response, "default": {"$ref": "#/components/responses/Error"}},
            },
            "get": {
                "operationId": f"GetResource{n}",
                "description": PROSE * 3,
                "parameters": common,
                "responses": {"200": response, "default": {"$ref": "#/components/responses/Error"}},
            },
        }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Generated payments API", "version": "2024-01-01"},
        "servers": [{"url": "https://api.example.com"}],
        "paths": paths,
        "components": {
            "parameters": {
                "IdempotencyKey": {
                    "name": "Idempotency-Key",
                    "in": "header",
                    "required": False,
                    "schema": {"type": "string", "maxLength": 255},
                },
                "ApiVersion": {"name": "Api-Version", "in": "header", "schema": {"type": "string"}},
                "Account": {"name": "Account", "in": "header", "schema": {"type": "string"}},
            },
            "responses": {
                "Error": {
                    "description": "An error.",
                    "content": {"application/json": {"schema": {"type": "object"}}},
                }
            },
            "schemas": schemas,
        },
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--operations", type=int, default=500)
    args = p.parse_args()
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(document(args.operations), f, indent=2)


if __name__ == "__main__":
    main()
