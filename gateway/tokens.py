"""Tokens signed with the shared secret, for development, tests and scripts.

``python -m gateway.tokens --sub alice --groups approvers`` prints a token the gateway
accepts when it verifies with ``AGUI_AUTH_HS256_SECRET``. Without that variable it signs
with the development secret ``make run`` keeps in ``.data/dev-secret``. Production
tokens come from the OIDC provider, not from here. ``make run``'s other development
secrets are kept here too, beside it.
"""

from __future__ import annotations

import argparse
import secrets
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import jwt

import codec
from settings import Settings

DATA = Path(__file__).resolve().parent.parent / ".data"
DEV_SECRET = DATA / "dev-secret"
"""The development secret of ``make run``, made on its first start, readable by its owner."""
DEV_SESSION_SECRET = DATA / "session-secret"
"""The key ``make run``'s gateway signs inbox sessions with, kept like the development
secret so a restart does not sign everyone out."""
DEV_PAYLOAD_KEYS = DATA / "payload-keys"
"""The payload key ``make run`` encrypts threads with when ``AGUI_PAYLOAD_KEYS`` is unset
(as that variable's value), kept so the next start reads what this one wrote."""
DEV_PAYLOAD_KEY_ID = "dev"
DEFAULT_TTL_SECONDS = 12 * 3600


def dev_secret() -> str:
    """The development secret, made (owner-only) if there is none yet."""
    return _kept_secret(DEV_SECRET)


def dev_session_secret() -> str:
    """The development session secret, made (owner-only) if there is none yet."""
    return _kept_secret(DEV_SESSION_SECRET)


def dev_payload_keys() -> str:
    """The development payload key, as ``AGUI_PAYLOAD_KEYS`` takes it, made (owner-only)
    if there is none yet."""
    return _kept_secret(DEV_PAYLOAD_KEYS, lambda: f"{DEV_PAYLOAD_KEY_ID}:{codec.new_key()}")


def _kept_secret(path: Path, make: Callable[[], str] = lambda: secrets.token_urlsafe(32)) -> str:
    if not path.exists():
        path.parent.mkdir(exist_ok=True)
        path.touch(mode=0o600)
        path.write_text(make())
    return path.read_text().strip()


def mint(
    secret: str,
    subject: str,
    groups: Sequence[str] = (),
    ttl_seconds: int = DEFAULT_TTL_SECONDS,
    settings: Settings | None = None,
) -> str:
    """A token for ``subject`` in ``groups``, valid for ``ttl_seconds``, with the issuer
    and audience ``settings`` require, if any."""
    settings = settings or Settings()
    now = int(time.time())
    claims: dict[str, object] = {
        "sub": subject,
        settings.auth_groups_claim: list(groups),
        "iat": now,
        "exp": now + ttl_seconds,
    }
    if settings.auth_issuer:
        claims["iss"] = settings.auth_issuer
    if settings.auth_audience:
        claims["aud"] = settings.auth_audience
    return jwt.encode(claims, secret, algorithm="HS256")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gateway.tokens", description=__doc__)
    parser.add_argument("--sub", required=True, help="the principal (the token's subject)")
    parser.add_argument("--groups", nargs="*", default=[], help="the principal's groups")
    parser.add_argument("--ttl", type=int, default=DEFAULT_TTL_SECONDS, help="seconds valid")
    args = parser.parse_args(argv)
    settings = Settings()
    if settings.auth_hs256_secret is not None:
        secret = settings.auth_hs256_secret.get_secret_value()
    elif DEV_SECRET.exists():
        secret = dev_secret()
    else:
        print(
            "No secret to sign with: set AGUI_AUTH_HS256_SECRET, or start `make run` once "
            "to make the development secret.",
            file=sys.stderr,
        )
        return 2
    print(mint(secret, args.sub, args.groups, args.ttl, settings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
