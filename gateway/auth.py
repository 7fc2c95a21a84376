"""Who is asking: every request but ``GET /healthz`` carries ``Authorization: Bearer <JWT>``.

Tokens are verified by PyJWT, one of two ways, as the settings say:

- an OIDC provider's keys (``AGUI_AUTH_JWKS_URL``, RS256/ES256), with the issuer and
  audience (``AGUI_AUTH_ISSUER``, ``AGUI_AUTH_AUDIENCE``) checked, for production;
- a shared secret (``AGUI_AUTH_HS256_SECRET``, HS256; issuer and audience checked when
  configured), for development, tests and simple deployments.

The principal is the token's ``sub``; its groups come from the claim
``AGUI_AUTH_GROUPS_CLAIM`` names. Without either way configured the gateway refuses to
start, unless anonymous access is switched on (``AGUI_AUTH_ANONYMOUS``) for a local
experiment: deny by default.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

import httpx
import jwt

from gateway.errors import ApiError, GatewayErrorCode
from settings import Settings

logger = logging.getLogger(__name__)

ASYMMETRIC = ["RS256", "ES256"]
"""What an OIDC provider's keys may sign with; ``none`` and HMAC never pass for them."""
JWKS_REFRESH_SECONDS = 60.0
"""The provider's keys are fetched again when a token names a key id they lack (a key
rotation), but no more often than this: forged key ids cannot make the gateway hammer
the provider."""
LEEWAY_SECONDS = 30
"""Clock skew tolerated on ``exp``, ``nbf`` and ``iat``."""
ANONYMOUS = "anonymous"


class AuthConfigError(ValueError):
    """The settings name no way to verify tokens, or an incomplete one."""


@dataclass(frozen=True)
class Principal:
    """Who sent a request: the token's subject and groups."""

    subject: str
    groups: frozenset[str]
    admin: bool
    """A member of the admin group: may read and list every thread."""


def may_read(principal: Principal, owner: str) -> bool:
    """Whether ``principal`` may read a thread of ``owner``: its own, or any if admin."""
    return principal.subject == owner or principal.admin


def unauthenticated(message: str) -> ApiError:
    """The 401 answered to a request without a valid token."""
    return ApiError(
        401,
        GatewayErrorCode.UNAUTHENTICATED,
        message,
        headers={"WWW-Authenticate": 'Bearer realm="agui"'},
    )


class Authenticator:
    """Turns a request's bearer token into its :class:`Principal`.

    Args:
        settings: Which way tokens are verified, and the claims that name groups.
        http: For the provider's keys (a client of the app's own, closed with it).
        refresh_seconds: The least time between two fetches of the provider's keys.
    """

    def __init__(
        self,
        settings: Settings,
        http: httpx.AsyncClient,
        refresh_seconds: float = JWKS_REFRESH_SECONDS,
    ) -> None:
        self._settings = settings
        self._http = http
        self._refresh_seconds = refresh_seconds
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched_at: float | None = None
        self._fetching = asyncio.Lock()
        if settings.auth_jwks_url:
            if not (settings.auth_issuer and settings.auth_audience):
                raise AuthConfigError(
                    "AGUI_AUTH_JWKS_URL needs AGUI_AUTH_ISSUER and AGUI_AUTH_AUDIENCE."
                )
        elif settings.auth_hs256_secret is None and not settings.auth_anonymous:
            raise AuthConfigError(
                "No way to verify tokens: set AGUI_AUTH_JWKS_URL (with AGUI_AUTH_ISSUER and "
                "AGUI_AUTH_AUDIENCE) or AGUI_AUTH_HS256_SECRET; or, for a local experiment "
                "only, AGUI_AUTH_ANONYMOUS=true."
            )

    @property
    def anonymous(self) -> bool:
        """Whether requests without a token are let in (as ``anonymous``)."""
        settings = self._settings
        return settings.auth_anonymous and not (
            settings.auth_jwks_url or settings.auth_hs256_secret
        )

    async def principal(self, token: str | None) -> Principal:
        """The principal a request's bearer token names (``None``: it sent none).

        Raises:
            ApiError: 401 ``UNAUTHENTICATED``: no token, or one that does not verify;
                503 ``AUTH_UNAVAILABLE``: the provider's keys cannot be fetched.
        """
        if self.anonymous:
            return Principal(ANONYMOUS, frozenset(), admin=False)
        if not token:
            raise unauthenticated("This endpoint needs an 'Authorization: Bearer <JWT>' header.")
        try:
            claims = await self._claims(token)
        except jwt.ExpiredSignatureError as error:
            raise unauthenticated("The token has expired.") from error
        except jwt.InvalidTokenError as error:
            # PyJWT's message names the failed check (audience, issuer, signature…);
            # it says nothing about the keys or the secret.
            raise unauthenticated(f"The token is not valid: {error}") from error
        return self._principal(claims)

    async def _claims(self, token: str) -> dict[str, Any]:
        settings = self._settings
        if settings.auth_jwks_url:
            key = await self._key(jwt.get_unverified_header(token).get("kid"))
            algorithms = ASYMMETRIC
            secret: Any = key
        else:
            assert settings.auth_hs256_secret is not None
            algorithms = ["HS256"]
            secret = settings.auth_hs256_secret.get_secret_value()
        claims: dict[str, Any] = jwt.decode(
            token,
            secret,
            algorithms=algorithms,
            audience=settings.auth_audience,
            issuer=settings.auth_issuer,
            leeway=LEEWAY_SECONDS,
            options={"require": ["exp", "sub"]},
        )
        return claims

    def _principal(self, claims: dict[str, Any]) -> Principal:
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            raise unauthenticated("The token's 'sub' claim must be a non-empty string.")
        groups = claims.get(self._settings.auth_groups_claim, [])
        if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
            raise unauthenticated(
                f"The token's {self._settings.auth_groups_claim!r} claim must be a list of strings."
            )
        return Principal(
            subject, frozenset(groups), admin=self._settings.auth_admin_group in groups
        )

    async def _key(self, kid: object) -> jwt.PyJWK:
        """The provider's key ``kid``, fetching the key set again if it is new to us."""
        if not isinstance(kid, str):
            raise jwt.InvalidTokenError("the token names no key id ('kid')")
        if kid not in self._keys:
            async with self._fetching:
                if kid not in self._keys and self._may_fetch():
                    await self._fetch_keys()
        key = self._keys.get(kid)
        if key is None:
            raise jwt.InvalidTokenError("the token's key is not one of the provider's")
        return key

    def _may_fetch(self) -> bool:
        fetched_at = self._fetched_at
        return fetched_at is None or time.monotonic() - fetched_at >= self._refresh_seconds

    async def _fetch_keys(self) -> None:
        url = self._settings.auth_jwks_url
        assert url is not None
        self._fetched_at = time.monotonic()
        try:
            response = await self._http.get(url)
            response.raise_for_status()
            key_set = jwt.PyJWKSet.from_dict(response.json())
        except (httpx.HTTPError, ValueError, jwt.PyJWKSetError) as error:
            # Logged without the URL's query (it may carry credentials); the client
            # only learns that its token could not be checked.
            logger.error("fetching the provider's keys failed: %s", type(error).__name__)
            raise ApiError(
                503,
                GatewayErrorCode.AUTH_UNAVAILABLE,
                "The identity provider's keys could not be fetched; try again later.",
            ) from error
        self._keys = {key.key_id: key for key in key_set.keys if key.key_id}
