"""The inbox page's conversation with the organisation's OIDC provider: the authorization
code flow with PKCE (S256), ``state`` and ``nonce``, and the ID token's verification.

Authlib's OAuth 2.0 client builds the authorization request and exchanges the code (with
the client's secret, when it has one); PyJWT verifies the ID token against the
provider's published keys. Every call to the provider goes through one HTTP client the
app owns, with a timeout, so a provider that is down is a clear error, not a hung request.

The provider's discovery document is read once and kept; its keys are read at each
sign-in, which is rare (once a session) and comes only after the provider accepted a
code, so a rotated key never fails a sign-in and forged callbacks cost the provider
nothing.
"""

from __future__ import annotations

import hmac
import logging
from dataclasses import dataclass
from typing import Any

import httpx2
import jwt
from authlib.common.security import generate_token
from authlib.integrations.base_client import OAuthError
from authlib.integrations.httpx_client import AsyncOAuth2Client

from gateway.auth import LEEWAY_SECONDS, AuthConfigError
from settings import Settings

logger = logging.getLogger(__name__)

PROVIDER_TIMEOUT_SECONDS = 10.0
"""How long one call to the provider may take."""
ID_TOKEN_ALGORITHMS = ["RS256", "PS256", "ES256", "EdDSA"]
"""What the provider may sign ID tokens with: its published keys, never HMAC or ``none``."""
RANDOM_BYTES = 32
"""Entropy of ``state``, ``nonce`` and the PKCE ``code_verifier``, in bytes."""


class ProviderUnavailable(Exception):
    """The provider could not be reached, or answered with something that is not OIDC."""


class SignInRefused(Exception):
    """The provider refused the code, or its ID token does not verify."""


@dataclass(frozen=True)
class Discovery:
    """What the gateway uses of the provider's ``/.well-known/openid-configuration``."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    end_session_endpoint: str | None


@dataclass(frozen=True)
class PendingSignIn:
    """What a callback needs of the authorization request it answers."""

    state: str
    nonce: str
    code_verifier: str


@dataclass(frozen=True)
class Identity:
    """Who the provider says signed in."""

    subject: str
    groups: list[str]


def configured(settings: Settings) -> bool:
    """Whether sign-in goes through an OIDC provider.

    Raises:
        AuthConfigError: The issuer is set without a client id, or the other way round.
    """
    if bool(settings.oidc_issuer) != bool(settings.oidc_client_id):
        raise AuthConfigError("AGUI_OIDC_ISSUER and AGUI_OIDC_CLIENT_ID go together.")
    return settings.oidc_issuer is not None


class OidcClient:
    """The gateway as the provider's client (a confidential one with a secret, else
    public). Open it with ``async with`` for the app's life.

    Args:
        settings: The provider, the client's id, secret and scopes, and the groups claim.
    """

    def __init__(self, settings: Settings) -> None:
        assert settings.oidc_issuer and settings.oidc_client_id
        self._issuer = settings.oidc_issuer.rstrip("/")
        self._client_id = settings.oidc_client_id
        self._groups_claim = settings.auth_groups_claim
        secret = settings.oidc_client_secret
        self._oauth = AsyncOAuth2Client(
            client_id=self._client_id,
            client_secret=secret.get_secret_value() if secret else None,
            token_endpoint_auth_method="client_secret_basic" if secret else "none",
            scope=settings.oidc_scopes,
            code_challenge_method="S256",
            timeout=PROVIDER_TIMEOUT_SECONDS,
        )
        self._discovery: Discovery | None = None

    async def __aenter__(self) -> OidcClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self._oauth.aclose()

    async def discovery(self) -> Discovery:
        """The provider's endpoints, read once (a failed read is tried again next time).

        Raises:
            ProviderUnavailable: The document cannot be read, or is not the issuer's.
        """
        if self._discovery is None:
            document = await self._get_json(f"{self._issuer}/.well-known/openid-configuration")
            try:
                discovery = Discovery(
                    issuer=document["issuer"],
                    authorization_endpoint=document["authorization_endpoint"],
                    token_endpoint=document["token_endpoint"],
                    jwks_uri=document["jwks_uri"],
                    end_session_endpoint=document.get("end_session_endpoint"),
                )
            except (KeyError, TypeError) as error:
                raise ProviderUnavailable("the discovery document lacks an endpoint") from error
            # OIDC Discovery 4.3: the document must name the issuer it was read from.
            if discovery.issuer.rstrip("/") != self._issuer:
                raise ProviderUnavailable("the discovery document names another issuer")
            self._discovery = discovery
        return self._discovery

    async def authorization(self, redirect_uri: str) -> tuple[str, PendingSignIn]:
        """Where to send the browser to sign in, and what its callback must match.

        Raises:
            ProviderUnavailable: The provider's endpoints cannot be read.
        """
        discovery = await self.discovery()
        pending = PendingSignIn(
            state=generate_token(RANDOM_BYTES),
            nonce=generate_token(RANDOM_BYTES),
            code_verifier=generate_token(RANDOM_BYTES * 2),
        )
        url, _ = self._oauth.create_authorization_url(
            discovery.authorization_endpoint,
            state=pending.state,
            code_verifier=pending.code_verifier,
            nonce=pending.nonce,
            redirect_uri=redirect_uri,
        )
        return str(url), pending

    async def sign_in(self, code: str, pending: PendingSignIn, redirect_uri: str) -> Identity:
        """Exchange the callback's ``code`` and verify the ID token it brings.

        Raises:
            ProviderUnavailable: The provider cannot be reached.
            SignInRefused: The provider refused the code, or its ID token does not verify.
        """
        discovery = await self.discovery()
        try:
            token = await self._oauth.fetch_token(
                discovery.token_endpoint,
                grant_type="authorization_code",
                code=code,
                code_verifier=pending.code_verifier,
                redirect_uri=redirect_uri,
            )
        except OAuthError as error:
            # The provider's error code (``invalid_grant``...), never the code itself.
            raise SignInRefused(f"the provider refused the code: {error.error}") from error
        except (httpx2.HTTPError, ValueError) as error:
            raise ProviderUnavailable(
                f"the token request failed: {type(error).__name__}"
            ) from error
        id_token = token.get("id_token")
        if not isinstance(id_token, str):
            raise SignInRefused("the provider's answer has no ID token (is 'openid' a scope?)")
        keys = await self._get_json(discovery.jwks_uri)
        return self._identity(id_token, keys, discovery.issuer, pending.nonce)

    async def end_session_url(self, post_logout_redirect_uri: str) -> str | None:
        """Where a signing-out browser also ends its session at the provider, if it says.

        Raises:
            ProviderUnavailable: The provider's endpoints cannot be read.
        """
        endpoint = (await self.discovery()).end_session_endpoint
        if endpoint is None:
            return None
        url = httpx2.URL(endpoint).copy_merge_params(
            {"client_id": self._client_id, "post_logout_redirect_uri": post_logout_redirect_uri}
        )
        return str(url)

    def _identity(self, id_token: str, keys: dict[str, Any], issuer: str, nonce: str) -> Identity:
        try:
            key = _signing_key(id_token, keys)
            claims = jwt.decode(
                id_token,
                key,
                algorithms=ID_TOKEN_ALGORITHMS,
                audience=self._client_id,
                issuer=issuer,
                leeway=LEEWAY_SECONDS,
                options={"require": ["exp", "iat", "sub", "nonce"]},
            )
        except jwt.PyJWTError as error:
            raise SignInRefused(f"the ID token does not verify: {error}") from error
        if not hmac.compare_digest(str(claims["nonce"]).encode(), nonce.encode()):
            raise SignInRefused("the ID token's nonce is not this sign-in's")
        audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        if len(audiences) > 1 and claims.get("azp") != self._client_id:
            raise SignInRefused("the ID token is for several clients and not authorized to us")
        subject = claims["sub"]
        groups = claims.get(self._groups_claim, [])
        if not isinstance(subject, str) or not subject:
            raise SignInRefused("the ID token's 'sub' is not a non-empty string")
        if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
            raise SignInRefused(f"the ID token's {self._groups_claim!r} is not a list of strings")
        return Identity(subject, groups)

    async def _get_json(self, url: str) -> dict[str, Any]:
        try:
            # No token of anyone's on the provider's public documents.
            response = await self._oauth.request("GET", url, withhold_token=True)
            response.raise_for_status()
            document = response.json()
        except (httpx2.HTTPError, ValueError) as error:
            raise ProviderUnavailable(f"reading {url} failed: {type(error).__name__}") from error
        if not isinstance(document, dict):
            raise ProviderUnavailable(f"{url} is not a JSON object")
        return document


def _signing_key(id_token: str, keys: dict[str, Any]) -> jwt.PyJWK:
    """The provider's key that signed ``id_token``: the one its ``kid`` names, or the
    only signing key when it names none."""
    kid = jwt.get_unverified_header(id_token).get("kid")
    candidates = [
        key
        for key in jwt.PyJWKSet.from_dict(keys).keys
        if key.public_key_use in (None, "sig") and (kid is None or key.key_id == kid)
    ]
    if len(candidates) != 1:
        raise jwt.InvalidTokenError("no single provider key matches the ID token's 'kid'")
    return candidates[0]
