"""The JSON API under /api/v1: one router per resource, thin over service.queries and service.ingest."""
