"""Who is asking: bearer tokens verified with a shared secret or a provider's JWKS (served
here over real HTTP, with keys made in the test), and every way a token can be wrong."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from gateway.auth import AuthConfigError, Authenticator, Principal
from gateway.errors import ApiError
from gateway.tokens import mint
from settings import Settings
from tests.jwks import AUDIENCE, ISSUER, Provider, serving

SECRET = "s3cret-for-unit-tests-only-0123456789"


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


def failure(error: pytest.ExceptionInfo[ApiError]) -> tuple[int, str]:
    return error.value.status, error.value.code.value


async def test_a_shared_secret_token_names_its_principal_and_groups(
    http: httpx.AsyncClient,
) -> None:
    settings = Settings(auth_hs256_secret=SECRET)
    auth = Authenticator(settings, http)
    token = mint(SECRET, "alice", ["approvers", "agui-admins"], settings=settings)
    assert await auth.principal(token) == Principal(
        "alice", frozenset({"approvers", "agui-admins"}), admin=True
    )
    bob = await auth.principal(mint(SECRET, "bob", settings=settings))
    assert (bob.subject, bob.admin) == ("bob", False)


@pytest.mark.parametrize(
    "token",
    [
        None,
        "",
        "not-a-jwt",
        mint("another-secret-entirely-0123456789", "alice"),
        mint(SECRET, "alice", ttl_seconds=-3600),
        jwt.encode({"sub": "alice", "exp": 2**40}, key=None, algorithm="none"),
        jwt.encode({"sub": "alice"}, SECRET, algorithm="HS256"),
        jwt.encode({"sub": "", "exp": 2**40}, SECRET, algorithm="HS256"),
        jwt.encode({"sub": "a", "exp": 2**40, "groups": "x"}, SECRET, "HS256"),
    ],
    ids=[
        "none",
        "empty",
        "garbage",
        "wrong-secret",
        "expired",
        "alg-none",
        "no-exp",
        "empty-sub",
        "groups-not-a-list",
    ],
)
async def test_a_request_without_a_valid_token_is_401_with_a_bearer_challenge(
    http: httpx.AsyncClient, token: str | None
) -> None:
    auth = Authenticator(Settings(auth_hs256_secret=SECRET), http)
    with pytest.raises(ApiError) as error:
        await auth.principal(token)
    assert failure(error) == (401, "UNAUTHENTICATED")
    assert error.value.headers == {"WWW-Authenticate": 'Bearer realm="agui"'}
    assert SECRET not in error.value.message


async def test_issuer_and_audience_are_checked_when_configured(http: httpx.AsyncClient) -> None:
    settings = Settings(auth_hs256_secret=SECRET, auth_issuer=ISSUER, auth_audience=AUDIENCE)
    auth = Authenticator(settings, http)
    assert (await auth.principal(mint(SECRET, "alice", settings=settings))).subject
    with pytest.raises(ApiError) as error:
        await auth.principal(mint(SECRET, "alice"))
    assert failure(error) == (401, "UNAUTHENTICATED")


def test_without_a_way_to_verify_tokens_the_gateway_refuses_to_start() -> None:
    with pytest.raises(AuthConfigError, match="AGUI_AUTH_ANONYMOUS"):
        Authenticator(Settings(), httpx.AsyncClient())
    with pytest.raises(AuthConfigError, match="AGUI_AUTH_ISSUER"):
        Authenticator(Settings(auth_jwks_url="http://127.0.0.1:1/jwks"), httpx.AsyncClient())


async def test_anonymous_access_is_only_what_was_switched_on(http: httpx.AsyncClient) -> None:
    anonymous = Authenticator(Settings(auth_anonymous=True), http)
    assert (await anonymous.principal(None)).subject == "anonymous"
    # A configured secret wins: the switch never opens a gateway that verifies tokens.
    both = Authenticator(Settings(auth_anonymous=True, auth_hs256_secret=SECRET), http)
    with pytest.raises(ApiError):
        await both.principal(None)


async def test_a_providers_rs256_and_es256_tokens_verify_with_its_published_keys(
    http: httpx.AsyncClient,
) -> None:
    with serving(Provider()) as provider:
        settings = Settings(auth_jwks_url=provider.url, auth_issuer=ISSUER, auth_audience=AUDIENCE)
        auth = Authenticator(settings, http)
        assert (await auth.principal(provider.token())).subject == "carol"
        ec_token = provider.token("ec-1", groups=["agui-admins"])
        assert (await auth.principal(ec_token)).admin
        assert provider.fetches == 1

        wrong = [
            provider.token(aud="someone-else"),
            provider.token(iss="https://evil.test"),
            provider.token(kid="rsa-2"),
            # The provider's public key used as an HMAC secret: algorithm confusion.
            jwt.encode(
                {"sub": "eve", "iss": ISSUER, "aud": AUDIENCE, "exp": time.time() + 60},
                SECRET,
                algorithm="HS256",
                headers={"kid": "rsa-1"},
            ),
        ]
        for token in wrong:
            with pytest.raises(ApiError) as error:
                await auth.principal(token)
            assert failure(error) == (401, "UNAUTHENTICATED")
        # Forged key ids do not make it fetch the keys again and again.
        assert provider.fetches == 1


async def test_a_rotated_key_is_fetched_when_a_token_first_names_it(
    http: httpx.AsyncClient,
) -> None:
    with serving(Provider()) as provider:
        settings = Settings(auth_jwks_url=provider.url, auth_issuer=ISSUER, auth_audience=AUDIENCE)
        auth = Authenticator(settings, http, refresh_seconds=0)
        assert (await auth.principal(provider.token())).subject == "carol"
        provider.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        with pytest.raises(ApiError):
            # Signed by the new key, but naming the old key's id: the old key stands.
            await auth.principal(provider.token())
        assert provider.fetches == 1
        provider.rotated = True
        assert (await auth.principal(provider.token(kid="rsa-2"))).subject == "carol"
        assert provider.fetches == 2


async def test_an_unreachable_provider_is_503_not_a_verdict_on_the_token(
    http: httpx.AsyncClient,
) -> None:
    with serving(Provider()) as provider:
        url, token = provider.url, provider.token()
    settings = Settings(auth_jwks_url=url, auth_issuer=ISSUER, auth_audience=AUDIENCE)
    with pytest.raises(ApiError) as error:
        await Authenticator(settings, http).principal(token)
    assert failure(error) == (503, "AUTH_UNAVAILABLE")
    assert url not in error.value.message
