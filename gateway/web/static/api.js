// The gateway's API as the page calls it: the session cookie goes with every request,
// the CSRF token with every one that changes something, and errors come back as
// ApiError with the gateway's stable code, put in words by describe().

export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

let csrfToken = null;

/** Remember the session's CSRF token, which every POST carries as X-CSRF-Token. */
export function setCsrfToken(token) {
  csrfToken = token;
}

/** Call the API; resolves to the JSON body, or rejects with an ApiError. */
export async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
  const init = { method, headers, credentials: 'same-origin' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  if (method !== 'GET') headers['X-CSRF-Token'] = csrfToken ?? '';
  let response;
  try {
    response = await fetch(path, init);
  } catch {
    throw new ApiError(0, 'NETWORK', 'The gateway cannot be reached.');
  }
  let data = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  if (!response.ok) {
    const error = (data && data.error) || {};
    throw new ApiError(
      response.status,
      error.code || `HTTP_${response.status}`,
      error.message || response.statusText,
      error.details,
    );
  }
  return data;
}

/** The path of one interrupt's resource. */
export function interruptPath(threadId, interruptId) {
  return `/threads/${encodeURIComponent(threadId)}/interrupts/${encodeURIComponent(interruptId)}`;
}

/** Whether the error means the person must sign in (again). */
export function needsSignIn(err) {
  return err instanceof ApiError && (err.status === 401 || err.code === 'CSRF_FAILED');
}

/** Where signing in starts, coming back to this page afterwards. */
export function loginUrl() {
  const next = location.pathname + location.hash;
  return `/inbox/login?next=${encodeURIComponent(next)}`;
}

const SENTENCES = {
  NOT_AN_APPROVER: "You are not one of this request's approvers.",
  INTERRUPT_EXPIRED: 'This request has expired or was already decided.',
  INTERRUPT_ALREADY_ANSWERED: 'This request has expired or was already decided.',
  POLICY_EXCEEDED: 'These changes need a stricter approval than this request has.',
  UNKNOWN_THREAD: 'This request no longer exists, or you may not see it.',
  UNKNOWN_INTERRUPT: 'This request no longer exists, or you may not see it.',
  CSRF_FAILED: 'Your session could not be verified: sign in again.',
  UNAUTHENTICATED: 'You are signed out: sign in again.',
  SESSION_EXPIRED: 'Your session has expired: sign in again.',
  TEMPORAL_UNAVAILABLE: 'The service is unavailable right now; try again in a moment.',
  TOO_MANY_REQUESTS: 'Too many requests right now; try again in a moment.',
  NETWORK: 'The gateway cannot be reached; check your connection and try again.',
};

/** An error in plain words: a sentence for the codes a person meets, else the
 * gateway's own message, with a 422's details (what exactly is invalid). */
export function describe(err) {
  if (!(err instanceof ApiError)) return String(err && err.message ? err.message : err);
  const sentence = SENTENCES[err.code] || (err.status === 409 ? SENTENCES.INTERRUPT_EXPIRED : null);
  if (sentence) return sentence;
  if (err.status === 422 && err.details !== undefined) {
    return `${err.message} ${detailsText(err.details)}`.trim();
  }
  return err.message;
}

function detailsText(details) {
  if (!Array.isArray(details)) return typeof details === 'string' ? details : JSON.stringify(details);
  return details
    .map((each) => {
      if (typeof each !== 'object' || each === null) return String(each);
      const where = Array.isArray(each.loc) ? each.loc.join('.') : each.path || '';
      return where ? `${where}: ${each.msg || each.message}` : each.msg || each.message;
    })
    .join('; ');
}
