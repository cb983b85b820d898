"""What the HTTP clients of the service (`perfdash ingest --url`, `perfdash bisect --request-id`) need besides the URL:
the bearer token, read from a file so it is never on a command line, and the certificates to trust.

- Token: ``--token-file PATH`` or ``$PERFDASH_TOKEN_FILE`` (a Jenkins file credential, a mounted secret). ``--token``
  and ``$PERFDASH_TOKEN`` still work for a shell at hand, but a command line shows in ``ps`` and a bound environment
  variable shows in ``docker exec ... env NAME=value`` on a Jenkins node.
- TLS: the service's certificate is verified against ``$PERFDASH_CA_BUNDLE`` (PEM, for a private CA) or, without it,
  the system's trust store; an ``https://`` URL is never accepted unverified.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from pathlib import Path

CA_BUNDLE_ENV = "PERFDASH_CA_BUNDLE"


class TokenError(Exception):
    pass


def read_token_file(path: Path) -> str:
    """The token in ``path`` (surrounding whitespace and a final newline dropped)."""
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise TokenError(f"cannot read the token file {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError:
        raise TokenError(f"the token file {path} is not text") from None
    if not token:
        raise TokenError(f"the token file {path} is empty")
    if any(c.isspace() for c in token):
        raise TokenError(f"the token file {path} holds more than one word")
    return token


def tls_verify(environ: Mapping[str, str], ca_bundle: Path | None = None) -> ssl.SSLContext:
    """The context an httpx client verifies the service with: the CA bundle given (flag, then $PERFDASH_CA_BUNDLE),
    else the system's trust store. Raises TokenError (a usage error) for a bundle that cannot be read."""
    bundle = ca_bundle or (Path(environ[CA_BUNDLE_ENV]) if environ.get(CA_BUNDLE_ENV) else None)
    if bundle is None:
        return ssl.create_default_context()
    try:
        return ssl.create_default_context(cafile=str(bundle))
    except (OSError, ssl.SSLError) as exc:
        raise TokenError(f"cannot use the CA bundle {bundle}: {exc}") from None
