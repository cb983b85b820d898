"""The FastAPI service (never imports torch)."""
