"""Finding result files on disk: what `perfdash ingest` stores directly and what it posts to a service.

Standard library only: the runner image (no service extra) and the service share it.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

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



def named_by_flags(args: argparse.Namespace, groups: dict[Path, dict[str, bytes]]) -> dict[Path, dict[str, bytes]]:
    """With --suite/--backend/--dtype/--mode: result files the harness named by hand (``speedup_inductor.csv``, any
    --output name) get the contract's name for that configuration; companions, manifests and samples keep theirs,
    and a file already named for another configuration is an error (the flags never rename a run)."""
    from perfdash.contract import ContractError, ResultFileName, RunKey, split_backend_variant
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
                new = contract_name(key, kind, ".json")
                if new in renamed:
                    raise ContractError(f"two {kind} record files for one run", file=name)
                renamed[new] = data
            else:
                renamed[name] = data
        out[directory] = renamed
    return out
