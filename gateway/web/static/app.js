// The inbox page: who is signed in, then the view the URL's fragment names:
// "#/" (to decide), "#/mine" (my requests), "#/t/<threadId>/i/<interruptId>" (one).

import { api, describe, loginUrl, setCsrfToken } from './api.js';
import { showDetail } from './detail.js';
import { h } from './dom.js';
import { showList } from './list.js';

const main = document.getElementById('main');
const who = document.getElementById('who');
let session = null;
let stopView = () => {};

/** The person must sign in (again): an expired session says so first, with a link;
 * anyone else goes straight to sign-in, which brings them back here. */
function signIn(err) {
  stopView();
  if (err && err.code === 'SESSION_EXPIRED') {
    main.replaceChildren(h('p', { role: 'alert', class: 'error' }, 'Your session has expired. ',
      h('a', { href: loginUrl() }, 'Sign in again')));
    return;
  }
  location.assign(loginUrl());
}

function route() {
  stopView();
  const hash = location.hash.replace(/^#/, '') || '/';
  const one = hash.match(/^\/t\/([^/]+)\/i\/([^/]+)$/);
  if (one) {
    stopView = showDetail(main, session, decodeURIComponent(one[1]), decodeURIComponent(one[2]), signIn);
  } else {
    stopView = showList(main, hash === '/mine' ? 'mine' : 'decide', signIn);
  }
}

async function signOut(button, error) {
  button.disabled = true;
  try {
    const answer = await api('POST', '/inbox/auth/logout');
    location.assign(answer.redirect);
  } catch (err) {
    button.disabled = false;
    error.textContent = describe(err);
    error.hidden = false;
  }
}

async function start() {
  try {
    session = await api('GET', '/inbox/auth/session');
  } catch (err) {
    if (err.status === 401) return signIn(err);
    main.replaceChildren(h('p', { role: 'alert', class: 'error' }, describe(err)));
    return;
  }
  setCsrfToken(session.csrfToken);
  const button = h('button', { type: 'button', class: 'secondary', id: 'sign-out' }, 'Sign out');
  const error = h('span', { role: 'alert', class: 'error' });
  error.hidden = true;
  button.addEventListener('click', () => signOut(button, error));
  const groups = session.groups.length ? ` (${session.groups.join(', ')})` : '';
  who.replaceChildren(h('span', { class: 'subject' }, `Signed in as ${session.subject}${groups}`), button, error);
  window.addEventListener('hashchange', route);
  route();
}

start();
