// Building the page's elements without innerHTML, so no text from the API is ever
// parsed as markup.

/** An element with attributes (class, data-*, aria-*, ...) and children (nodes or text). */
export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') {
      element.addEventListener(name.slice(2), value);
    } else {
      element.setAttribute(name, value === true ? '' : String(value));
    }
  }
  append(element, children);
  return element;
}

function append(element, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : String(child));
  }
}

/** An error line next to a control: empty until set, announced when set. */
export function errorLine() {
  const line = h('p', { class: 'error', role: 'alert' });
  line.hidden = true;
  return {
    element: line,
    /** Show ``text``, and a link after it if given ({href, text}). */
    show(text, link) {
      line.replaceChildren(text);
      if (link) line.append(' ', h('a', { href: link.href }, link.text));
      line.hidden = false;
    },
    clear() {
      line.textContent = '';
      line.hidden = true;
    },
  };
}
