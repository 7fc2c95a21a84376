"""The few HTML pages of signing in: the development sign-in form, sign-in not
configured, a failed sign-in, signed out.

Plain, accessible HTML: no script and no inline style, served with a Content Security
Policy that allows neither and lets the forms post only to the gateway.
"""

from __future__ import annotations

from html import escape

from fastapi.responses import HTMLResponse

CSP = "default-src 'none'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
"""Nothing loads, nothing runs, nothing frames the page; forms post to the gateway only."""
LOGIN_PATH = "/inbox/login"
DEV_SIGNIN_PATH = "/inbox/auth/dev"
LOGIN_CSRF_FIELD = "csrf"


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    html = (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{escape(title)}</title>\n</head>\n<body>\n<main>\n"
        f"<h1>{escape(title)}</h1>\n{body}\n</main>\n</body>\n</html>\n"
    )
    return HTMLResponse(
        html,
        status_code=status,
        headers={
            "Content-Security-Policy": CSP,
            "Cache-Control": "no-store",
            "Referrer-Policy": "no-referrer",
            "X-Content-Type-Options": "nosniff",
        },
    )


def dev_signin_form(csrf: str, next_path: str, problem: str | None = None) -> HTMLResponse:
    """The development sign-in: any user, any groups; ``problem`` says what to correct."""
    alert = f'<p role="alert">{escape(problem)}</p>\n' if problem else ""
    body = (
        "<p>Development sign-in: sign in as any user, in any groups. "
        "Never enabled in production.</p>\n"
        f"{alert}"
        f'<form method="post" action="{DEV_SIGNIN_PATH}">\n'
        f'<input type="hidden" name="{LOGIN_CSRF_FIELD}" value="{escape(csrf)}">\n'
        f'<input type="hidden" name="next" value="{escape(next_path)}">\n'
        '<p><label for="user">User</label>\n'
        '<input id="user" name="user" required maxlength="128" autocomplete="username"></p>\n'
        '<p><label for="groups">Groups</label>\n'
        '<input id="groups" name="groups" aria-describedby="groups-hint">\n'
        '<span id="groups-hint">Comma-separated, e.g. finance, ops</span></p>\n'
        '<p><button type="submit">Sign in</button></p>\n'
        "</form>"
    )
    return _page("Sign in to the inbox", body, 400 if problem else 200)


def not_configured() -> HTMLResponse:
    """Sign-in is off: which settings turn it on (their names, never their values)."""
    body = (
        "<p>Sign-in to the inbox is not configured on this gateway.</p>\n"
        "<p>An operator enables it with the organisation's OIDC provider: "
        "<code>AGUI_OIDC_ISSUER</code>, <code>AGUI_OIDC_CLIENT_ID</code> "
        "(and <code>AGUI_OIDC_CLIENT_SECRET</code> for a confidential client), with "
        "<code>AGUI_SESSION_SECRET</code>; or, for development only, "
        "<code>AGUI_INBOX_DEV_SIGNIN=true</code> (<code>make run</code> does this).</p>"
    )
    return _page("Sign-in is not configured", body, 404)


def failed(sentence: str, status: int) -> HTMLResponse:
    """A sign-in that did not work: what happened, in a sentence, and a way to retry."""
    body = f'<p>{escape(sentence)}</p>\n<p><a href="{LOGIN_PATH}">Try signing in again</a></p>'
    return _page("Sign-in failed", body, status)


def signed_out() -> HTMLResponse:
    """Where the provider sends a browser back after signing it out."""
    body = f'<p>You have signed out.</p>\n<p><a href="{LOGIN_PATH}">Sign in again</a></p>'
    return _page("Signed out", body)
