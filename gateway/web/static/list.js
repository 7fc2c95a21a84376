// The list: "To decide" (interrupts the person may decide now) and "My requests" (those
// of their own threads), soonest deadline first, kept current by polling. A request of
// one's own that leaves the server's list stays on "My requests" with its outcome.

import { api, describe, interruptPath, needsSignIn } from './api.js';
import { errorLine, h } from './dom.js';
import {
  REASONS,
  approvalsText,
  askedText,
  deadlineText,
  outcomeText,
  reasonText,
  secondsLeft,
} from './format.js';

export const POLL_MILLISECONDS = 2000;
/** How often the list asks the gateway again, so others' decisions show. */
const TICK_MILLISECONDS = 1000;

const filters = { agent: '', reason: '' };
/** Requests of one's own that closed while the page was open, by key: they keep
 * showing their outcome on "My requests" until the page is reloaded. */
const closedMine = new Map();

const keyOf = (item) => `${item.threadId}\u0000${item.interrupt.id}`;

/** Show the list of ``tab`` ("decide" or "mine") in ``main``; returns a function that
 * stops its timers. */
export function showList(main, tab, onSignIn) {
  const rows = new Map();
  const status = errorLine();
  const empty = h('p', { class: 'empty' }, tab === 'decide'
    ? 'Nothing waits for your decision.'
    : 'None of your requests is waiting.');
  const list = h('ul', { class: 'items', 'aria-label': tab === 'decide' ? 'Requests to decide' : 'My requests' });
  const agentSelect = h('select', { id: 'filter-agent', name: 'agent' }, h('option', { value: '' }, 'All agents'));
  const reasonSelect = h(
    'select',
    { id: 'filter-reason', name: 'reason' },
    h('option', { value: '' }, 'All reasons'),
    Object.entries(REASONS).map(([value, text]) => h('option', { value }, text)),
  );
  reasonSelect.value = filters.reason;
  const refresh = () => poll().catch(() => {});
  agentSelect.addEventListener('change', () => {
    filters.agent = agentSelect.value;
    items = []; // not closed: filtered out
    refresh();
  });
  reasonSelect.addEventListener('change', () => {
    filters.reason = reasonSelect.value;
    items = [];
    refresh();
  });

  main.replaceChildren(
    tabs(tab),
    h(
      'section',
      { id: 'panel', role: 'tabpanel', 'aria-labelledby': `tab-${tab}` },
      h(
        'div',
        { class: 'filters' },
        h('label', { for: 'filter-agent' }, 'Agent ', agentSelect),
        h('label', { for: 'filter-reason' }, 'Reason ', reasonSelect),
      ),
      status.element,
      empty,
      list,
    ),
  );

  api('GET', '/agents')
    .then((body) => {
      for (const agent of body.agents) agentSelect.append(h('option', { value: agent.name }, agent.name));
      agentSelect.value = filters.agent;
    })
    .catch(() => {});

  let items = [];
  let stopped = false;

  async function poll() {
    if (stopped || document.hidden) return;
    const query = new URLSearchParams({ role: tab });
    if (filters.agent) query.set('agent', filters.agent);
    if (filters.reason) query.set('reason', filters.reason);
    let body;
    try {
      body = await api('GET', `/interrupts?${query}`);
    } catch (err) {
      if (needsSignIn(err)) return onSignIn(err);
      status.show(`The list could not be refreshed: ${describe(err)}`);
      return;
    }
    if (stopped) return;
    status.clear();
    const fresh = body.interrupts.filter((item) => (tab === 'decide' ? item.mayDecide : item.mine));
    if (tab === 'mine') noteClosed(items, fresh);
    items = fresh;
    render();
  }

  /** Requests of one's own that were listed and no longer are: closed, so fetch how. */
  function noteClosed(before, after) {
    const open = new Set(after.map(keyOf));
    for (const item of before) {
      const key = keyOf(item);
      if (open.has(key) || closedMine.has(key)) continue;
      closedMine.set(key, { ...item, outcome: 'Closed' });
      api('GET', interruptPath(item.threadId, item.interrupt.id))
        .then((view) => {
          if (view.open) {
            closedMine.delete(key);
            return;
          }
          closedMine.set(key, { ...item, outcome: outcomeText(view.audit, item.interrupt.expiresAt) });
          render();
        })
        .catch(() => {});
    }
  }

  function matches(item) {
    return (!filters.agent || item.agent === filters.agent)
      && (!filters.reason || item.interrupt.reason === filters.reason);
  }

  function render() {
    const now = Date.now();
    const shown = items.filter((item) => tab === 'mine' || !expired(item, now)).sort(bySoonest);
    if (tab === 'mine') {
      const open = new Set(shown.map(keyOf));
      for (const [key, item] of closedMine) if (!open.has(key) && matches(item)) shown.push(item);
    }
    const wanted = new Set(shown.map(keyOf));
    for (const [key, row] of rows) {
      if (!wanted.has(key)) {
        row.element.remove();
        rows.delete(key);
      }
    }
    shown.forEach((item, index) => {
      const key = keyOf(item);
      let row = rows.get(key);
      if (!row) {
        row = makeRow(item);
        rows.set(key, row);
      }
      row.update(item, now);
      // Moving an element loses its focus: only move those out of place.
      if (list.children[index] !== row.element) list.insertBefore(row.element, list.children[index] || null);
    });
    empty.hidden = shown.length > 0;
  }

  const ticker = setInterval(() => render(), TICK_MILLISECONDS);
  const poller = setInterval(refresh, POLL_MILLISECONDS);
  const onVisible = () => refresh();
  document.addEventListener('visibilitychange', onVisible);
  refresh();
  return () => {
    stopped = true;
    clearInterval(ticker);
    clearInterval(poller);
    document.removeEventListener('visibilitychange', onVisible);
  };
}

function tabs(current) {
  const tab = (name, href, text) => h(
    'a',
    {
      id: `tab-${name}`,
      role: 'tab',
      href,
      'aria-selected': String(name === current),
      'aria-controls': 'panel',
      tabindex: name === current ? '0' : '-1',
      class: 'tab',
    },
    text,
  );
  const bar = h('nav', { class: 'tabs', role: 'tablist', 'aria-label': 'Lists' },
    tab('decide', '#/', 'To decide'),
    tab('mine', '#/mine', 'My requests'));
  // The tab pattern: arrows move between tabs, Tab moves on to the panel.
  bar.addEventListener('keydown', (event) => {
    if (event.key !== 'ArrowRight' && event.key !== 'ArrowLeft') return;
    const other = current === 'decide' ? '#/mine' : '#/';
    location.hash = other;
    event.preventDefault();
  });
  return bar;
}

function expired(item, now) {
  const left = secondsLeft(item.interrupt.expiresAt, now);
  return left !== null && left <= 0;
}

function bySoonest(a, b) {
  const at = (item) => (item.interrupt.expiresAt ? Date.parse(item.interrupt.expiresAt) : Infinity);
  return at(a) - at(b);
}

function makeRow(item) {
  const agent = h('span', { class: 'agent' });
  const reason = h('span', { class: 'reason' });
  const deadline = h('span', { class: 'deadline' });
  const message = h('span', { class: 'message' });
  const owner = h('span', { class: 'owner' });
  const approvals = h('span', { class: 'approvals' });
  const outcome = h('span', { class: 'outcome' });
  const link = h(
    'a',
    { class: 'item-link', href: `#/t/${encodeURIComponent(item.threadId)}/i/${encodeURIComponent(item.interrupt.id)}` },
    h('span', { class: 'item-top' }, agent, reason, deadline),
    message,
    h('span', { class: 'meta' }, owner, approvals),
    outcome,
  );
  const element = h('li', { class: 'item', 'data-thread': item.threadId, 'data-interrupt': item.interrupt.id }, link);
  return {
    element,
    update(current, now) {
      agent.textContent = current.agent || 'unknown agent';
      reason.textContent = reasonText(current.interrupt.reason);
      message.textContent = current.interrupt.message || '(no message)';
      owner.textContent = askedText(current.owner, current.askedAt);
      approvals.textContent = approvalsText(current.interrupt) || '';
      const closed = Boolean(current.outcome);
      element.classList.toggle('closed', closed);
      outcome.textContent = closed ? current.outcome : '';
      outcome.hidden = !closed;
      deadline.textContent = closed ? '' : deadlineText(current.interrupt.expiresAt, now);
    },
  };
}
