"""The post-ingest hooks the app and the CLI run after each stored run (see service.ingest.PostIngestHook).

Add a hook here with one line; both `create_app()` and `perfdash ingest` use this list.
"""

from __future__ import annotations

from service.ingest import PostIngestHook
from service.settings import Settings


def post_ingest_hooks(settings: Settings) -> list[PostIngestHook]:
    del settings  # for hooks that need configuration (e.g. GitHub reporting)
    from service.detection.detector import detection_hook  # detection after every ingest (issue 5)

    return [detection_hook]
