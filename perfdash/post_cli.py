"""`perfdash ingest PATH... --url URL`: post result files to a service, spooling what it cannot take now.

Runs in the runner images, which install the runner extra only: it imports nothing from service/.

Per upload (the spool first, oldest first, then the PATHs):
- stored: done (a spooled entry is removed);
- unavailable (connection error, timeout, 408/429/502/503/504) or a server error (another 5xx): kept in the spool
  and retried by the next invocation; after the first unavailable answer the rest get one attempt each, so a service
  that is down costs one backoff, not one per upload;
- unauthorized (401/403): kept in the spool, the upload is fine and the token is not;
- refused (another 4xx, or a 5xx in more than --max-server-errors invocations for the same upload; the 5xx of one
  invocation count once): a spooled entry is moved to ``rejected/`` in the spool with the reason; a PATH's files
  stay where they are. Never retried.
- a spooled entry this user does not own, or that others may write to (perfdash.spool): never posted, moved to
  ``untrusted/``; a spool directory that is not private to this user is neither read nor written.
- the server's TLS certificate did not verify: nothing was sent and nothing is spooled (a spooled entry stays where
  it is); not an outage, so not "try later": the URL or the CA bundle is wrong, or someone is in between.
One entry never stops the others. Exit status: 5 if a certificate did not verify, else 1 if anything was refused or
unauthorized, else 4 if an upload could be neither posted nor spooled (its files stay where they are), else 3 if
anything was spooled, else 0.
"""

from __future__ import annotations

import argparse
import os
import shutil
import ssl
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from perfdash import spool
from perfdash.client_auth import TokenError, read_token_file, tls_verify
from perfdash.contract import ContractError
from perfdash.resultfiles import collect, named_by_flags
from perfdash.upload import Answer, Upload, UploadVerdict, post_upload

EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_SPOOLED = 3
EXIT_NOT_KEPT = 4
EXIT_CERTIFICATE = 5
DEFAULT_SPOOL = Path.home() / ".cache" / "perfdash" / "spool"


@dataclass(frozen=True, slots=True)
class PostConfig:
    """What the upload client reads from the environment (the service's Settings stay the service's)."""

    spool_dir: Path
    token: str | None
    token_file: Path | None
    ingest_tokens: tuple[str, ...]
    environ: Mapping[str, str]

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> PostConfig:
        token_file = environ.get("PERFDASH_TOKEN_FILE")
        return cls(spool_dir=Path(environ.get("PERFDASH_SPOOL_DIR") or DEFAULT_SPOOL),
                   token=environ.get("PERFDASH_TOKEN") or None,
                   token_file=Path(token_file) if token_file else None,
                   ingest_tokens=tuple(t.strip() for t in environ.get("PERFDASH_INGEST_TOKENS", "").split(",")
                                       if t.strip()),
                   environ=environ)


def resolve_token(args: argparse.Namespace, config: PostConfig) -> str:
    """--token, --token-file, $PERFDASH_TOKEN, $PERFDASH_TOKEN_FILE, then the first of $PERFDASH_INGEST_TOKENS.
    A file or the environment keeps the token out of the process list; --token shows in `ps`."""
    if args.token:
        return args.token
    if args.token_file is not None:
        return read_token_file(Path(args.token_file))
    if config.token:
        return config.token
    if config.token_file is not None:
        return read_token_file(config.token_file)
    if config.ingest_tokens:
        return config.ingest_tokens[0]
    raise TokenError("--url needs a token: PERFDASH_TOKEN, PERFDASH_TOKEN_FILE or --token-file "
                     "(or --token, which shows in the process list)")


@dataclass
class Tally:
    """How the invocation went, for the exit status."""

    refused: list[str] = field(default_factory=list)
    not_kept: list[str] = field(default_factory=list)
    spooled: list[str] = field(default_factory=list)
    untrusted_server: list[str] = field(default_factory=list)

    def exit_status(self) -> int:
        if self.untrusted_server:  # the first thing to fix: nothing reaches that server
            return EXIT_CERTIFICATE
        if self.refused:
            return EXIT_REFUSED
        if self.not_kept:
            return EXIT_NOT_KEPT
        return EXIT_SPOOLED if self.spooled else 0


@dataclass
class _Poster:
    url: str
    token: str
    attempts: int
    max_server_errors: int
    spool_dir: Path
    verify: ssl.SSLContext | bool = True
    tally: Tally = field(default_factory=Tally)
    service_down: bool = False

    def post(self, upload: Upload, server_errors: int = 0) -> Answer:
        answer = post_upload(self.url, self.token, upload, attempts=1 if self.service_down else self.attempts,
                             server_errors=server_errors, max_server_errors=self.max_server_errors,
                             verify=self.verify)
        if answer.verdict is UploadVerdict.UNAVAILABLE:
            self.service_down = True
        return answer

    def drain_spool(self) -> None:
        try:
            self._drain_spool()
        except spool.SpoolUnsafe as exc:
            # nothing in it is posted with our token, and nothing is spooled there
            print(f"error: {exc}; its uploads are not posted", file=sys.stderr)
            self.tally.refused.append(str(self.spool_dir))

    def _drain_spool(self) -> None:
        with spool.drain_lock(self.spool_dir) as mine:
            if not mine:
                print(f"note: another perfdash ingest is posting the spool {self.spool_dir}; leaving it to that one",
                      file=sys.stderr)
                return
            for entry in spool.entries(self.spool_dir):
                untrusted = spool.untrusted_reason(entry)
                if untrusted is not None:
                    self._set_aside(entry, untrusted)
                    continue
                try:
                    spooled = spool.load(entry)
                except (OSError, ValueError) as exc:
                    self._reject(entry, f"unreadable spool entry: {exc}", None)
                    continue
                answer = self.post(spooled.upload, spooled.server_errors)
                if answer.verdict is UploadVerdict.STORED:
                    _report(answer.body or {}, f"spooled {entry.name}")
                    try:
                        shutil.rmtree(entry)
                    except OSError as exc:
                        print(f"warning: posted {entry} but cannot remove it ({exc.strerror or exc}); the next "
                              "ingest posts it again and the service answers 'already stored'", file=sys.stderr)
                elif answer.verdict is UploadVerdict.REFUSED:
                    self._reject(entry, answer.detail, answer.status)
                elif answer.verdict is UploadVerdict.CERTIFICATE:
                    print(f"error: spooled upload {entry.name} NOT POSTED: {answer.detail}; it stays spooled",
                          file=sys.stderr)
                    self.tally.untrusted_server.append(entry.name)
                else:
                    self._keep(entry, answer)

    def _reject(self, entry: Path, reason: str, status: int | None) -> None:
        self._move_aside(entry, reason, status, spool.REJECTED,
                         f"REJECTED spooled upload {entry.name}: the service refused it ({reason}); it is not "
                         "retried", "moved to")

    def _set_aside(self, entry: Path, reason: str) -> None:
        self._move_aside(entry, reason, None, spool.UNTRUSTED,
                         f"NOT POSTED spooled upload {entry.name}: {reason}, so it may not be this user's upload",
                         "set aside in")

    def _move_aside(self, entry: Path, reason: str, status: int | None, folder: str, headline: str,
                    verb: str) -> None:
        """Move a spooled upload out of the queue (refused or untrusted): said on stderr, counted as refused."""
        try:
            where = f"{verb} {spool.reject(entry, reason, status, folder)}"
        except OSError as exc:
            where = f"could not be moved aside ({exc.strerror or exc}), it stays at {entry}"
        print(f"error: {headline}, {where}", file=sys.stderr)
        self.tally.refused.append(entry.name)

    def _keep(self, entry: Path, answer: Answer) -> None:
        try:
            spool.record_failure(entry, answer.server_errors, answer.detail)
        except OSError:
            pass  # the count only hastens a refusal; the entry itself is intact
        if answer.verdict is UploadVerdict.UNAUTHORIZED:
            print(f"error: spooled upload {entry.name}: the token is refused ({answer.detail}); it stays spooled",
                  file=sys.stderr)
            self.tally.refused.append(entry.name)
        else:
            print(f"warning: spooled upload {entry.name} not taken ({answer.verdict}: {answer.detail}); it stays "
                  "spooled for the next ingest", file=sys.stderr)
            self.tally.spooled.append(entry.name)

    def post_directory(self, directory: Path, upload: Upload) -> None:
        answer = self.post(upload)
        if answer.verdict is UploadVerdict.STORED:
            _report(answer.body or {}, str(directory))
            return
        if answer.verdict is UploadVerdict.REFUSED:
            print(f"error: REJECTED {directory}: the service refused it ({answer.detail}); not retried, the files "
                  f"stay in {directory}", file=sys.stderr)
            self.tally.refused.append(str(directory))
            return
        if answer.verdict is UploadVerdict.CERTIFICATE:
            print(f"error: NOT POSTED {directory}: {answer.detail}; not spooled, the files stay in {directory}",
                  file=sys.stderr)
            self.tally.untrusted_server.append(str(directory))
            return
        try:
            where = spool.save(self.spool_dir, upload, server_errors=answer.server_errors, last_error=answer.detail)
        except OSError as exc:
            print(f"error: {directory} was not posted ({answer.verdict}: {answer.detail}) and cannot be spooled to "
                  f"{self.spool_dir} ({exc.strerror or exc}); the files stay in {directory}: run this ingest again "
                  "later, or set PERFDASH_SPOOL_DIR to a writable directory", file=sys.stderr)
            self.tally.not_kept.append(str(directory))
            return
        if answer.verdict is UploadVerdict.UNAUTHORIZED:
            print(f"error: {directory}: the token is refused ({answer.detail}); spooled to {where}, posted by the "
                  "next ingest with a valid token", file=sys.stderr)
            self.tally.refused.append(str(directory))
        else:
            print(f"warning: {directory} not taken ({answer.verdict}: {answer.detail}); spooled to {where}, "
                  "retried on the next ingest", file=sys.stderr)
            self.tally.spooled.append(str(directory))


def _utc_text(moment: datetime) -> str:
    """--timestamp as the service reads it: RFC 3339 with an offset (a time without one is UTC, as a direct ingest
    takes it)."""
    return (moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment).isoformat()


def post_results(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> int:
    config = PostConfig.from_environ(os.environ if environ is None else environ)
    try:
        token = resolve_token(args, config)
        verify = tls_verify(config.environ, getattr(args, "ca_bundle", None))
        groups = named_by_flags(args, collect(args.paths))
    except (TokenError, FileNotFoundError, ContractError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not groups:
        print("error: no result files found", file=sys.stderr)
        return EXIT_USAGE
    poster = _Poster(args.url, token, args.retries, args.max_server_errors, config.spool_dir, verify)
    poster.drain_spool()
    # When the uploads were made: a run without a start of its own is dated then, also when it waits in the spool
    # (the service never keys a run by it).
    made_at = datetime.now(UTC).isoformat(timespec="seconds")
    for directory, files in sorted(groups.items()):
        form = {k: v for k, v in {
            "machine": args.machine, "commit": args.commit, "torch_version": args.torch_version,
            "timestamp": _utc_text(args.timestamp) if args.timestamp else None, "made_at": made_at}.items() if v}
        poster.post_directory(directory, Upload(files=files, form=form))
    tally = poster.tally
    if len(tally.refused) + len(tally.not_kept) + len(tally.untrusted_server) > 1:  # one is one clear line
        print(f"error: {len(tally.refused)} upload(s) refused, {len(tally.not_kept)} neither posted nor spooled, "
              f"{len(tally.spooled)} spooled for later (spool: {config.spool_dir})", file=sys.stderr)
    return tally.exit_status()


def _report(body: dict, what: str) -> None:
    for run in body.get("runs", []):
        state = "stored" if run["created"] else "already stored"
        print(f"{what}: run {run['run_id']} {state}: {run['suite']} {run['backend']}, {run['models']} models")
    for notice in body.get("notices", []):
        print(f"note: {notice}")
    for error in body.get("hook_errors", []):
        print(f"warning: post-ingest hook failed: {error}", file=sys.stderr)
