"""The inbox page: ``GET /inbox``, its own files (``/inbox/static/...``) and the few
library files it uses, from ``gateway/web/node_modules`` (``/inbox/vendor/...``).

None of these hold data, so none needs a session: the page reads everything from the
API with the browser's session cookie (``gateway/signin.py``). Nothing is loaded from
elsewhere, and the Content-Security-Policy says so. The page routes by the URL's
fragment (``/inbox#/mine``), so nothing here claims the paths under ``/inbox/`` that
sign-in owns (``/inbox/login``, ``/inbox/auth/...``).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, HTMLResponse, Response

from gateway.errors import ApiError, GatewayErrorCode

router = APIRouter(include_in_schema=False)

WEB = Path(__file__).resolve().parent / "web"
STATIC = WEB / "static"
NODE_MODULES = WEB / "node_modules"
VENDOR = {
    "jsoneditor.js": NODE_MODULES / "@json-editor/json-editor/dist/jsoneditor.js",
}
"""The library files the page may load, by the name it loads them under: an allowlist,
so nothing else in ``node_modules`` is ever served."""
MEDIA_TYPES = {
    ".html": "text/html",
    ".js": "text/javascript",
    ".css": "text/css",
    ".svg": "image/svg+xml",
}

CSP = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        # json-editor sets a few style attributes itself (setAttribute("style", ...)), e.g.
        # to hide a label visually; <style> elements stay forbidden (its theme rules are
        # turned off, disable_theme_rules), so no injected stylesheet can apply.
        "style-src 'self'",
        "style-src-elem 'self'",
        "style-src-attr 'unsafe-inline'",
        "img-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    # Revalidated on every load (ETag), so a deploy's page never runs beside old scripts.
    "Cache-Control": "no-cache",
}
NOT_INSTALLED = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Inbox unavailable</title></head>
<body><h1>The inbox page is not installed</h1>
<p>Its files are missing from <code>gateway/web</code>: run <code>make install</code>
(which runs <code>npm ci --prefix gateway/web</code>) and reload.</p></body></html>
"""


def _installed() -> bool:
    return (STATIC / "index.html").is_file() and all(path.is_file() for path in VENDOR.values())


def _file(path: Path) -> FileResponse:
    return FileResponse(
        path,
        media_type=MEDIA_TYPES.get(path.suffix, "application/octet-stream"),
        headers=SECURITY_HEADERS,
    )


def _not_found(name: str) -> ApiError:
    return ApiError(404, GatewayErrorCode.UNKNOWN_ROUTE, f"No page file {name!r}.")


@router.get("/inbox")
async def inbox() -> Response:
    """The page, or a 503 saying how to install it when its files are missing."""
    if not _installed():
        return HTMLResponse(NOT_INSTALLED, status_code=503, headers=SECURITY_HEADERS)
    return _file(STATIC / "index.html")


@router.get("/inbox/static/{name}")
async def static(name: str) -> FileResponse:
    """One of the page's own files (flat: no subfolders, so no path escapes the folder)."""
    files = {path.name: path for path in STATIC.iterdir()} if STATIC.is_dir() else {}
    path = files.get(name)
    if path is None or not path.is_file():
        raise _not_found(name)
    return _file(path)


@router.get("/inbox/vendor/{name}")
async def vendor(name: str) -> FileResponse:
    """A library file of :data:`VENDOR`."""
    path = VENDOR.get(name)
    if path is None or not path.is_file():
        raise _not_found(name)
    return _file(path)
