// What an approver changed in a tool call's arguments, field by field, so they see it
// before they approve: changed (before -> after), added, removed.

const isObject = (value) => value !== null && typeof value === 'object' && !Array.isArray(value);

/** The differences between two argument objects: [{path, kind, before, after}], with
 * nested objects compared field by field and anything else as a whole value. */
export function diffArguments(before, after, path = []) {
  const changes = [];
  const keys = [...new Set([...Object.keys(before || {}), ...Object.keys(after || {})])];
  for (const key of keys) {
    const here = [...path, key];
    const had = before && Object.prototype.hasOwnProperty.call(before, key);
    const has = after && Object.prototype.hasOwnProperty.call(after, key);
    if (!has) changes.push({ path: here, kind: 'removed', before: before[key] });
    else if (!had) changes.push({ path: here, kind: 'added', after: after[key] });
    else if (isObject(before[key]) && isObject(after[key])) changes.push(...diffArguments(before[key], after[key], here));
    else if (JSON.stringify(before[key]) !== JSON.stringify(after[key])) {
      changes.push({ path: here, kind: 'changed', before: before[key], after: after[key] });
    }
  }
  return changes;
}

/** A value as the diff shows it: strings as they are, the rest as JSON. */
export function shown(value) {
  return typeof value === 'string' ? value : JSON.stringify(value);
}
