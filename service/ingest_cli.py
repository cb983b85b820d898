"""`perfdash ingest PATH...`: into DATABASE_URL directly, or posted to a service with --url."""

from __future__ import annotations

import argparse
import shutil
import sys
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

from perfdash.contract import ContractError

_PATTERNS = ("*.csv", "*.json", "*_samples.jsonl")


def collect(paths: list[str]) -> dict[Path, dict[str, bytes]]:
    """Result files grouped by directory (one directory may hold several runs; two directories may hold files of
    the same name, which are different runs)."""
    found: dict[Path, dict[str, bytes]] = defaultdict(dict)
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files = sorted({f for pattern in _PATTERNS for f in path.rglob(pattern) if f.is_file()})
        elif path.is_file():
            files = [path]
        else:
            raise FileNotFoundError(f"{raw}: no such file or directory")
        for file in files:
            found[file.parent.resolve()][file.name] = file.read_bytes()
    return dict(found)


def _default_timestamp(directory: Path, files: dict[str, bytes]) -> datetime:
    """Without --timestamp or a manifest: when the CSVs were last written (the run's end), so re-ingesting the same
    files gives the same run key."""
    mtimes = [(directory / name).stat().st_mtime for name in files if name.endswith(".csv")]
    return datetime.fromtimestamp(int(max(mtimes)), UTC) if mtimes else datetime.now(UTC)


def named_by_flags(args: argparse.Namespace, groups: dict[Path, dict[str, bytes]]) -> dict[Path, dict[str, bytes]]:
    """With --suite/--backend/--dtype/--mode: result files the harness named by hand (``speedup_inductor.csv``, any
    --output name) get the contract's name for that configuration; companions, manifests and samples keep theirs,
    and a file already named for another configuration is an error (the flags never rename a run)."""
    from perfdash.contract import ResultFileName, RunKey, split_backend_variant
    from perfdash.harness_files import Role, classify, contract_name, kind_of_hand_run_file

    flags = {"suite": args.suite, "backend": args.backend, "dtype": args.dtype, "mode": args.mode}
    if not any(flags.values()):
        return groups
    missing = [f"--{k}" for k, v in flags.items() if not v]
    if missing:
        raise ContractError(f"naming a run by flags needs {', '.join(missing)} too")
    backend, variant = split_backend_variant(args.backend)
    key = RunKey(backend=backend, variant=variant, suite=args.suite, dtype=args.dtype, mode=args.mode,
                 device=args.device or "cpu")
    out: dict[Path, dict[str, bytes]] = {}
    for directory, files in groups.items():
        renamed: dict[str, bytes] = {}
        for name, data in files.items():
            try:
                item = classify(name)
            except ContractError:  # a name without the configuration: the flags give it
                item = None
            if item is not None and item.role is Role.RESULT_CSV:
                named = ResultFileName.parse(name).key
                if named != key:
                    raise ContractError(f"the name says {named.stem}, the flags say {key.stem}", file=name)
                renamed[name] = data
                continue
            role = item.role if item is not None else Role.RESULT_CSV
            if role is Role.RESULT_CSV and name.endswith(".csv"):
                header = data.decode("utf-8-sig", errors="replace").split("\n", 1)[0]
                new = contract_name(key, kind_of_hand_run_file(name, header))
                if new in renamed:
                    raise ContractError(f"two {new.rsplit('_', 1)[1][:-4]} files for one run", file=name)
                renamed[new] = data
            elif role in (Role.RESULT_CSV, Role.BENCHMARK_JSON) and name.endswith(".json"):
                # its records carry most of the configuration; the name gives the rest (a timeout's record has none)
                kind = "accuracy" if name.startswith("accuracy") else "performance"
                renamed[contract_name(key, kind, ".json")] = data
            else:
                renamed[name] = data
        out[directory] = renamed
    return out


def run_ingest(args: argparse.Namespace) -> int:
    from service.settings import Settings

    settings = Settings()
    try:
        groups = named_by_flags(args, collect(args.paths))
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ContractError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not groups:
        print("error: no result files found", file=sys.stderr)
        return 2
    if args.url:
        return _post(args, settings, groups)
    return _direct(args, settings, groups)


def _direct(args: argparse.Namespace, settings, groups: dict[Path, dict[str, bytes]]) -> int:
    from service.db import make_engine, make_session_factory
    from service.hooks import post_ingest_hooks
    from service.ingest import IngestConflict, IngestDefaults, bundles_from_files, ingest
    from service.migrate import current_heads, upgrade

    if not current_heads(settings.database_url):  # a fresh database (the embedded SQLite default): create it
        upgrade(settings.database_url)
    bundles = []
    try:
        for directory, files in sorted(groups.items()):
            defaults = IngestDefaults(machine=args.machine, commit=args.commit, torch_version=args.torch_version,
                                      timestamp=args.timestamp or _default_timestamp(directory, files))
            bundles += bundles_from_files(files, defaults)
    except ContractError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    engine = make_engine(settings.database_url)
    try:
        with make_session_factory(engine)() as session:
            report = ingest(session, bundles, post_ingest_hooks(settings))
    except IngestConflict as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        engine.dispose()
    for run in report.runs:
        state = "stored" if run.created else "already stored"
        print(f"run {run.run_id} {state}: {run.suite} {run.backend}, {run.models} models")
    for notice in report.notices:
        print(f"note: {notice}")
    for error in report.hook_errors:
        print(f"warning: post-ingest hook failed: {error}", file=sys.stderr)
    return 0


def _post(args: argparse.Namespace, settings, groups: dict[Path, dict[str, bytes]]) -> int:
    import httpx

    from service.client import Rejected, Upload, load_spooled, post_upload, reject_spooled, spool, spooled

    token = args.token or next(iter(settings.ingest_token_list), "")
    if not token:
        print("error: --url needs --token (or PERFDASH_INGEST_TOKENS)", file=sys.stderr)
        return 2
    status = 0
    # Older uploads first, so the service sees nights in order.
    for entry in spooled(settings.spool_dir):
        try:
            _report(post_upload(args.url, token, load_spooled(entry), attempts=args.retries), f"spooled {entry.name}")
            shutil.rmtree(entry)
        except Rejected as exc:
            print(f"error: spooled upload {entry.name} refused ({exc}); moved to {reject_spooled(entry)}",
                  file=sys.stderr)
            status = 1
        except (httpx.HTTPError, OSError) as exc:
            print(f"warning: service still unreachable ({exc}); {entry.name} stays spooled", file=sys.stderr)
            break
    for directory, files in sorted(groups.items()):
        form = {k: v for k, v in {
            "machine": args.machine, "commit": args.commit, "torch_version": args.torch_version,
            "timestamp": (args.timestamp or _default_timestamp(directory, files)).isoformat()}.items() if v}
        upload = Upload(files=files, form=form)
        try:
            _report(post_upload(args.url, token, upload, attempts=args.retries), str(directory))
        except Rejected as exc:
            print(f"error: {directory}: {exc}", file=sys.stderr)
            status = 1
        except httpx.HTTPError as exc:
            where = spool(settings.spool_dir, upload)
            print(f"warning: service unreachable ({exc}); spooled to {where}, retried on the next ingest",
                  file=sys.stderr)
            status = status or 3
    return status


def _report(body: dict, what: str) -> None:
    for run in body.get("runs", []):
        state = "stored" if run["created"] else "already stored"
        print(f"{what}: run {run['run_id']} {state}: {run['suite']} {run['backend']}, {run['models']} models")
    for notice in body.get("notices", []):
        print(f"note: {notice}")
    for error in body.get("hook_errors", []):
        print(f"warning: post-ingest hook failed: {error}", file=sys.stderr)
