"""The post-ingest hooks the app and the CLI run after each stored run (see service.ingest.hooks.PostIngestHook).

Add a hook here with one line; both `create_app()` and `perfdash ingest` use this list (the app runs its own noise
figures cache's `after_ingest` after them: service/app.py).
"""

from __future__ import annotations

from service.ingest.hooks import PostIngestHook
from service.settings import Settings


def post_ingest_hooks(settings: Settings) -> list[PostIngestHook]:
    from service.detection.night import DetectionHook  # detection after every ingest (issue 5), on every core (31)

    return [DetectionHook(workers=settings.detection_workers)]
