// One request: the conversation up to the question, the tool call (with an edit form and
// a review of the changes, when the approval allows edits) or a form generated from the
// responseSchema, the decision's outcome and the audit.

import { api, describe, interruptPath, loginUrl, needsSignIn } from './api.js';
import { diffArguments, shown } from './diff.js';
import { errorLine, h } from './dom.js';
import { errorsText, schemaForm } from './forms.js';
import {
  approvalsText,
  approversText,
  askedText,
  auditText,
  deadlineText,
  outcomeText,
  reasonText,
  when,
} from './format.js';
import { POLL_MILLISECONDS } from './list.js';

const ROLES = { user: 'User', assistant: 'Assistant', tool: 'Tool result', system: 'System', developer: 'Developer' };

/** Show one request in ``main``; returns a function that stops its timers. */
export function showDetail(main, session, threadId, interruptId, onSignIn) {
  const path = interruptPath(threadId, interruptId);
  let current = null;
  let lastInterrupt = null;
  let note = null;
  let stopped = false;
  let deadline = null;
  let approvals = null;
  const loadError = errorLine();

  async function load() {
    try {
      return await api('GET', path);
    } catch (err) {
      if (needsSignIn(err)) onSignIn(err);
      throw err;
    }
  }

  function render(view) {
    current = view;
    if (view.interrupt) lastInterrupt = view.interrupt;
    const interrupt = lastInterrupt;
    const heading = h('h2', { id: 'detail-title', tabindex: '-1' }, interrupt ? interrupt.message || reasonText(interrupt.reason) : 'Request');
    deadline = h('span', { class: 'deadline' });
    approvals = h('span', { class: 'approvals' });
    const facts = h(
      'p',
      { class: 'meta' },
      h('span', { class: 'agent' }, view.agent || 'unknown agent'),
      interrupt ? h('span', { class: 'reason' }, reasonText(interrupt.reason)) : null,
      view.owner ? h('span', { class: 'owner' }, askedText(view.owner, view.askedAt)) : null,
      view.open ? deadline : null,
      view.open ? approvals : null,
    );
    const who = interrupt && approversText(interrupt);
    main.replaceChildren(
      h('p', { class: 'back' }, h('a', { href: view.owner === session.subject && !view.mayDecide ? '#/mine' : '#/' }, '← Back to the list')),
      h('article', { class: 'detail' },
        heading,
        facts,
        who ? h('p', { class: 'who-decides' }, `Decided by: ${who}`) : null,
        note ? h('p', { class: `note ${note.kind}`, role: 'status' }, note.text) : null,
        view.open ? conversation(view.messages, interrupt) : null,
        view.open ? decisionArea(view, interrupt) : outcome(view, interrupt),
        audit(view.audit)),
    );
    tick();
    return heading;
  }

  function tick() {
    if (!current || !current.open || !lastInterrupt) return;
    deadline.textContent = deadlineText(lastInterrupt.expiresAt);
    approvals.textContent = approvalsText(lastInterrupt) || '';
  }

  function decisionArea(view, interrupt) {
    const mine = view.owner === session.subject;
    if (!view.mayDecide && !mine) {
      return h('p', { class: 'note' }, 'You may not decide this request.');
    }
    const errors = errorLine();
    const cancel = h('button', { type: 'button', class: 'secondary', id: 'cancel-request' }, 'Cancel request');
    cancel.addEventListener('click', () => decide({ status: 'cancelled' }, errors));
    if (!view.mayDecide) {
      return h('section', { class: 'decide', 'aria-labelledby': 'decide-title' },
        h('h3', { id: 'decide-title' }, 'Your request'),
        h('p', {}, 'Others decide this request; you may cancel it.'),
        h('div', { class: 'buttons' }, cancel),
        errors.element);
    }
    if (interrupt.reason === 'tool_call') return toolDecision(view, interrupt, cancel, errors);
    return answerForm(interrupt, cancel, errors);
  }

  function toolDecision(view, interrupt, cancel, errors) {
    const call = toolCallOf(view.messages, interrupt.toolCallId);
    const schema = interrupt.responseSchema || {};
    const editSchema = schema.properties && schema.properties.editedArgs;
    const approve = h('button', { type: 'button', id: 'approve' }, 'Approve');
    const deny = h('button', { type: 'button', class: 'danger', id: 'deny' }, 'Deny');
    approve.addEventListener('click', () => decide({ status: 'resolved', payload: { approved: true } }, errors));
    deny.addEventListener('click', () => decide({ status: 'resolved', payload: { approved: false } }, errors));
    const section = h('section', { class: 'decide', 'aria-labelledby': 'decide-title' },
      h('h3', { id: 'decide-title' }, 'Tool call'),
      h('p', {}, 'The agent asks to run ', h('code', { class: 'tool-name' }, call.name), ' with:'),
      argumentsTable(call.arguments));
    const buttons = h('div', { class: 'buttons' }, approve, deny);
    section.append(buttons, errors.element);
    if (editSchema) {
      const edit = h('button', { type: 'button', class: 'secondary', id: 'edit-arguments', 'aria-expanded': 'false' }, 'Edit arguments');
      buttons.append(edit);
      const editor = editPanel(editSchema, call.arguments);
      section.append(editor.element);
      edit.addEventListener('click', () => {
        edit.setAttribute('aria-expanded', 'true');
        editor.open();
      });
    }
    buttons.append(cancel);
    return section;
  }

  function editPanel(schema, proposed) {
    const formErrors = errorLine();
    const reviewErrors = errorLine();
    const container = h('div', { class: 'form', id: 'edit-form' });
    const reviewButton = h('button', { type: 'button', id: 'review-changes' }, 'Review changes');
    const discard = h('button', { type: 'button', class: 'secondary' }, 'Discard edits');
    const editing = h('div', { class: 'panel', id: 'edit-panel' },
      h('h3', {}, 'Edit arguments'),
      container,
      h('div', { class: 'buttons' }, reviewButton, discard),
      formErrors.element);
    const changes = h('div', { class: 'changes' });
    const approveEdited = h('button', { type: 'button', id: 'approve-edited' }, 'Approve with these changes');
    const backToEditing = h('button', { type: 'button', class: 'secondary' }, 'Back to editing');
    const review = h('div', { class: 'panel', id: 'review-panel', 'aria-labelledby': 'review-title' },
      h('h3', { id: 'review-title', tabindex: '-1' }, 'Review your changes'),
      changes,
      h('div', { class: 'buttons' }, approveEdited, backToEditing),
      reviewErrors.element);
    editing.hidden = true;
    review.hidden = true;
    const element = h('div', {}, editing, review);
    let form = null;
    let edited = null;

    reviewButton.addEventListener('click', () => {
      formErrors.clear();
      const problems = form.check();
      if (problems.length) {
        formErrors.show(`Fix these first: ${errorsText(problems)}`);
        return;
      }
      edited = form.value();
      const diff = diffArguments(proposed, edited);
      changes.replaceChildren(diffTable(diff));
      approveEdited.disabled = diff.length === 0;
      editing.hidden = true;
      review.hidden = false;
      review.querySelector('h3').focus();
    });
    discard.addEventListener('click', () => {
      editing.hidden = true;
      form.destroy();
      form = null;
    });
    backToEditing.addEventListener('click', () => {
      review.hidden = true;
      editing.hidden = false;
      reviewErrors.clear();
    });
    approveEdited.addEventListener('click', () => decide(
      { status: 'resolved', payload: { approved: true, editedArgs: edited } },
      reviewErrors,
    ));
    return {
      element,
      async open() {
        review.hidden = true;
        editing.hidden = false;
        if (!form) form = await schemaForm(container, { title: 'Arguments', ...schema }, proposed);
        // The first field a person can see (json-editor keeps hidden ones too).
        const first = [...container.querySelectorAll('input, select, textarea')]
          .find((field) => field.type !== 'hidden' && field.getClientRects().length > 0);
        if (first) first.focus();
      },
    };
  }

  function answerForm(interrupt, cancel, errors) {
    const container = h('div', { class: 'form', id: 'answer-form' });
    const send = h('button', { type: 'button', id: 'send-answer' }, 'Send answer');
    const section = h('section', { class: 'decide', 'aria-labelledby': 'decide-title' },
      h('h3', { id: 'decide-title' }, 'Your answer'),
      container,
      h('div', { class: 'buttons' }, send, cancel),
      errors.element);
    const ready = schemaForm(container, interrupt.responseSchema || {});
    send.addEventListener('click', async () => {
      errors.clear();
      const form = await ready;
      const problems = form.check();
      if (problems.length) {
        errors.show(`Nothing was sent. Fix these first: ${errorsText(problems)}`);
        return;
      }
      decide({ status: 'resolved', payload: form.value() }, errors);
    });
    return section;
  }

  async function decide(body, errors) {
    errors.clear();
    const buttons = [...main.querySelectorAll('button')];
    buttons.forEach((button) => { button.disabled = true; });
    try {
      const result = await api('POST', `${path}/decisions`, body);
      note = { kind: 'success', text: resultText(result) };
      const heading = render(await load());
      heading.focus();
    } catch (err) {
      buttons.forEach((button) => { button.disabled = false; });
      if (needsSignIn(err)) errors.show(describe(err), { href: loginUrl(), text: 'Sign in' });
      else errors.show(describe(err));
    }
  }

  async function refresh() {
    if (stopped || document.hidden || !current) return;
    let view;
    try {
      view = await load();
    } catch {
      return;
    }
    if (stopped) return;
    if (view.open !== current.open) {
      note = note || { kind: 'info', text: 'This request closed while you had it open.' };
      render(view);
    } else if (view.interrupt) {
      lastInterrupt = view.interrupt;
      current = view;
      tick();
    }
  }

  main.replaceChildren(h('p', {}, 'Loading…'), loadError.element);
  load()
    .then((view) => {
      if (!stopped) render(view).focus();
    })
    .catch((err) => {
      if (stopped) return;
      main.replaceChildren(h('p', { class: 'back' }, h('a', { href: '#/' }, '← Back to the list')), loadError.element);
      loadError.show(describe(err));
    });
  const ticker = setInterval(tick, 1000);
  const poller = setInterval(refresh, POLL_MILLISECONDS);
  return () => {
    stopped = true;
    clearInterval(ticker);
    clearInterval(poller);
  };
}

/** The tool call an approval is about, from the conversation. */
function toolCallOf(messages, toolCallId) {
  for (const message of messages || []) {
    for (const call of message.toolCalls || []) {
      if (call.id === toolCallId) {
        let args = {};
        try {
          args = JSON.parse(call.function.arguments || '{}');
        } catch {
          args = { arguments: call.function.arguments };
        }
        return { name: call.function.name, arguments: args };
      }
    }
  }
  return { name: 'unknown tool', arguments: {} };
}

function resultText(result) {
  if (result.outcome === 'settled') return 'Settled: your decision was the last one needed, and the agent carries on.';
  if (result.outcome === 'pending') {
    return `Recorded: ${result.received} of ${result.needed} approvals so far; waiting for the others.`;
  }
  return 'Already recorded: your decision had counted before.';
}

function textOf(content) {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((part) => part.text || `[${part.type}]`).join(' ');
  return content === null || content === undefined ? '' : JSON.stringify(content);
}

function conversation(messages, interrupt) {
  const items = (messages || []).map((message) => h(
    'li',
    { class: `message role-${message.role}` },
    h('span', { class: 'role' }, ROLES[message.role] || message.role),
    textOf(message.content) ? h('p', { class: 'text' }, textOf(message.content)) : null,
    (message.toolCalls || []).map((call) => h(
      'div',
      { class: 'tool-call' },
      'Calls ', h('code', {}, call.function.name), ' ',
      h('pre', {}, call.function.arguments),
    )),
  ));
  items.push(h('li', { class: 'message question' },
    h('span', { class: 'role' }, 'Question'),
    h('p', { class: 'text' }, (interrupt && interrupt.message) || '')));
  return h('section', { class: 'conversation', 'aria-labelledby': 'conversation-title' },
    h('h3', { id: 'conversation-title' }, 'Conversation'),
    h('ol', {}, items));
}

function argumentsTable(args) {
  return h('table', { class: 'arguments' },
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Argument'), h('th', { scope: 'col' }, 'Value'))),
    h('tbody', {}, Object.entries(args).map(([name, value]) => h('tr', {},
      h('th', { scope: 'row' }, name), h('td', {}, shown(value))))));
}

function diffTable(diff) {
  if (!diff.length) return h('p', {}, 'You changed nothing: use Approve to approve the call as proposed.');
  const cell = (kind, value) => (kind === 'before'
    ? h('td', {}, h('del', {}, shown(value)))
    : h('td', {}, h('ins', {}, shown(value))));
  return h('table', { class: 'diff', id: 'diff' },
    h('thead', {}, h('tr', {},
      h('th', { scope: 'col' }, 'Field'), h('th', { scope: 'col' }, 'Proposed'), h('th', { scope: 'col' }, 'Yours'))),
    h('tbody', {}, diff.map((change) => h('tr', { class: change.kind },
      h('th', { scope: 'row' }, change.path.join('.'), change.kind === 'changed' ? '' : ` (${change.kind})`),
      change.kind === 'added' ? h('td', {}, '—') : cell('before', change.before),
      change.kind === 'removed' ? h('td', {}, '—') : cell('after', change.after)))));
}

function outcome(view, interrupt) {
  return h('section', { class: 'outcome', 'aria-labelledby': 'outcome-title' },
    h('h3', { id: 'outcome-title' }, 'Outcome'),
    h('p', { class: 'outcome-text' }, outcomeText(view.audit, interrupt ? interrupt.expiresAt : null)));
}

function audit(records) {
  if (!records || !records.length) return null;
  return h('section', { class: 'audit', 'aria-labelledby': 'audit-title' },
    h('h3', { id: 'audit-title' }, 'Audit'),
    h('ol', {}, records.map((record) => h('li', {},
      h('time', { datetime: record.at }, when(record.at)), ' ', auditText(record)))));
}
