"""What a run and a configuration are, as the hashes they are stored under. A run's key is a hash of what the run
is: its configuration (machine included), commit and partition, plus the manifest's start time when there is one,
else the run's content."""

from __future__ import annotations

import hashlib
import json

from perfdash.axes import configuration_identity
from perfdash.manifest import RunConfig
from service.ingest.bundle import RunBundle, as_utc


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def configuration_key(config: RunConfig, fingerprint: str) -> str:
    """Hash of everything that makes two runs of a suite comparable (the series axes minus model and batch size):
    the key axes of perfdash.axes and the machine."""
    return _digest(configuration_identity(config, fingerprint))


def run_key(bundle: RunBundle) -> str:
    """What the run is: configuration (machine included), commit, partition, and its start when the manifest has
    one; a run without a start is its content, so the same files posted twice (or copied) are one run."""
    manifest = bundle.manifest
    config = manifest.config
    identity = {
        "configuration": configuration_key(config, manifest.machine.fingerprint()),
        "commit": manifest.torch_git_commit or "",
        "partition": [config.partition_id, config.total_partitions],
    }
    if manifest.start_time is not None:
        identity["start"] = as_utc(manifest.start_time).isoformat()
    else:
        identity["content"] = bundle.content_sha256
    return _digest(identity)
