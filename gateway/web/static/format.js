// How the page words the things it shows: deadlines, approvals, outcomes.

/** Seconds left until an ISO time, or null without one. */
export function secondsLeft(expiresAt, now = Date.now()) {
  if (!expiresAt) return null;
  return Math.floor((Date.parse(expiresAt) - now) / 1000);
}

/** A countdown: "3d 4h", "2h 05m", "4m 09s", "12s". */
export function countdown(seconds) {
  if (seconds <= 0) return 'expired';
  const days = Math.floor(seconds / 86400);
  const hours = Math.floor((seconds % 86400) / 3600);
  const minutes = Math.floor((seconds % 3600) / 60);
  const secs = seconds % 60;
  const two = (n) => String(n).padStart(2, '0');
  if (days > 0) return `${days}d ${hours}h`;
  if (hours > 0) return `${hours}h ${two(minutes)}m`;
  if (minutes > 0) return `${minutes}m ${two(secs)}s`;
  return `${secs}s`;
}

/** The deadline's words: "expires in 4m 09s", "no deadline". */
export function deadlineText(expiresAt, now = Date.now()) {
  const left = secondsLeft(expiresAt, now);
  if (left === null) return 'no deadline';
  return left > 0 ? `expires in ${countdown(left)}` : 'expired';
}

/** metadata.approvers, if the interrupt has it. */
export function approversOf(interrupt) {
  const shown = interrupt && interrupt.metadata && interrupt.metadata.approvers;
  return shown && typeof shown === 'object' ? shown : null;
}

/** "Approvals 1 of 2 (bob)", or null for an interrupt without approvers. */
export function approvalsText(interrupt) {
  const shown = approversOf(interrupt);
  if (!shown) return null;
  const by = shown.approvedBy && shown.approvedBy.length ? ` (${shown.approvedBy.join(', ')})` : '';
  return `Approvals ${shown.received ?? 0} of ${shown.needed ?? 1}${by}`;
}

/** Who may decide, in words: "finance (not the requester)". */
export function approversText(interrupt) {
  const shown = approversOf(interrupt);
  if (!shown) return null;
  const who = [...(shown.users || []), ...(shown.groups || []).map((group) => `group ${group}`)];
  let text = who.join(', ') || 'the owner';
  if (shown.excludeRequester) text += ' (not the requester)';
  return text;
}

/** What a decision did, as a verb: approved, denied, answered, cancelled. */
export function verbOf(record) {
  if (record.status === 'cancelled') return 'cancelled';
  if (record.approved === true) return 'approved';
  if (record.approved === false) return 'denied';
  return 'answered';
}

const VERB_TITLES = {
  approved: 'Approved',
  denied: 'Denied',
  answered: 'Answered',
  cancelled: 'Cancelled',
};

/** The outcome of a closed interrupt from its audit: "Approved by bob, carol", or
 * "Expired" when nobody's decision closed it and its deadline passed. */
export function outcomeText(audit, expiresAt, now = Date.now()) {
  const decisions = (audit || []).filter(
    (record) => record.principal && record.kind !== 'permit' && record.outcome !== 'rejected'
      && record.outcome !== 'superseded',
  );
  if (decisions.length) {
    const last = decisions[decisions.length - 1];
    const verb = verbOf(last);
    const who = [...new Set(decisions.filter((r) => verbOf(r) === verb).map((r) => r.principal))];
    return `${VERB_TITLES[verb]} by ${who.join(', ')}`;
  }
  const left = secondsLeft(expiresAt, now);
  if (left !== null && left <= 0) return 'Expired';
  return 'Closed';
}

/** An audit record in words: "carol approved", "permit issued for the call",
 * "Operator erin (temporal-cli:erin@ops1) resumed the thread". */
export function auditText(record) {
  let text;
  if (record.kind === 'permit') {
    text = record.outcome === 'rejected' ? 'The tool refused the permit' : 'Permit issued for the approved call';
  } else if (record.kind === 'operator_resume') {
    // The name the operator typed, then who Temporal says sent it, when known.
    const identity = record.identity ? ` (${record.identity})` : '';
    text = `Operator ${record.operator || record.principal || ''}${identity} resumed the thread`.replace('  ', ' ');
  } else {
    text = `${record.principal} ${verbOf(record)}`;
  }
  if (record.outcome && record.outcome !== 'applied') text += ` (${record.outcome})`;
  return text;
}

/** A time as the reader's locale shows it. */
export function when(iso) {
  return new Date(iso).toLocaleString();
}

/** Who asked and when: "Asked by alice at 24/11/2026, 10:02:03". */
export function askedText(owner, askedAt) {
  if (!owner) return '';
  return askedAt ? `Asked by ${owner} at ${when(askedAt)}` : `Asked by ${owner}`;
}

export const REASONS = {
  tool_call: 'Tool call',
  input_required: 'Input required',
  confirmation: 'Confirmation',
};

/** A reason in words: "Tool call", or the reason itself for one we do not know. */
export function reasonText(reason) {
  return REASONS[reason] || reason;
}
