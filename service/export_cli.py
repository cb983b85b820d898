"""`perfdash export --format pytorch-json`: stored runs as the records PyTorch's harness writes for its benchmark
database (perfdash.pytorch_json), one directory per run laid out as the harness leaves it, so the files ingest back
into perfdash or go to PyTorch's tooling."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from perfdash.pytorch_json import export_records

if TYPE_CHECKING:
    from service.settings import Settings


def run_export(args: argparse.Namespace, settings: Settings) -> int:
    from service.db import session_scope
    from service.queries.pytorch_csv import model_result, run_key
    from service.queries.runs import get_run
    from service.queries.summary import night_summary

    with session_scope(settings) as session:
        run_ids = args.run or [row.run.id for row in night_summary(session, night=args.night).rows]
        if not run_ids:
            print("error: no stored run to export", file=sys.stderr)
            return 1
        out = Path(args.output_dir)
        for run_id in run_ids:
            run = get_run(session, run_id)
            if run is None:
                print(f"error: no run {run_id}", file=sys.stderr)
                return 1
            c = run.configuration
            key = run_key(c)
            extra = {"perfdash_run_id": run.id, "torch_git_commit": run.torch_git_commit,
                     "torch_version": run.torch_version, "machine": c.machine.fingerprint,
                     "compile_mode": c.compile_mode, "threads": c.threads,
                     "started_at": run.started_at.isoformat() if run.started_at else None}
            lines = export_records(key, [model_result(r, c.device) for r in run.results], extra)
            folder = out if len(run_ids) == 1 else out / f"run-{run_id}"
            folder.mkdir(parents=True, exist_ok=True)
            for kind, records in lines.items():
                if records:
                    path = folder / f"{key.stem}_{kind}.json"
                    path.write_text("\n".join(records) + "\n", encoding="utf-8")
                    print(f"run {run_id}: {path} ({len(records)} records)")
    return 0
