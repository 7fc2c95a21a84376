"""An OIDC provider's JWKS endpoint for the tests: keys made in the test, served over
real HTTP from a thread, with the tokens they sign."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

ISSUER = "https://issuer.test"
AUDIENCE = "agui"


class Provider:
    """An OIDC provider's JWKS endpoint, with an RSA and an EC key, counting fetches."""

    def __init__(self) -> None:
        self.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.ec = ec.generate_private_key(ec.SECP256R1())
        self.fetches = 0
        self.url = ""
        self.rotated = False

    def jwks(self) -> dict[str, Any]:
        keys = []
        for kid, key, algorithm in (
            ("rsa-2" if self.rotated else "rsa-1", self.rsa.public_key(), RSAAlgorithm),
            ("ec-1", self.ec.public_key(), ECAlgorithm),
        ):
            jwk = json.loads(algorithm.to_jwk(key))  # type: ignore[attr-defined]
            keys.append({**jwk, "kid": kid, "use": "sig"})
        return {"keys": keys}

    def token(self, kid: str = "rsa-1", **claims: Any) -> str:
        body = {"sub": "carol", "iss": ISSUER, "aud": AUDIENCE, "exp": time.time() + 60}
        key = self.ec if kid.startswith("ec") else self.rsa
        algorithm = "ES256" if kid.startswith("ec") else "RS256"
        return jwt.encode({**body, **claims}, key, algorithm=algorithm, headers={"kid": kid})


@contextmanager
def serving(provider: Provider) -> Iterator[Provider]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            provider.fetches += 1
            body = json.dumps(provider.jwks()).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    provider.url = f"http://127.0.0.1:{server.server_address[1]}/jwks"
    try:
        yield provider
    finally:
        server.shutdown()
        server.server_close()
