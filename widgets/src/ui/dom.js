// Tiny DOM helpers. Text from a trace (node names, event sentences) only ever goes through
// textContent or setAttribute, never through innerHTML: `<img src=x onerror=...>` as a name
// stays text.
export const SVG_NS = "http://www.w3.org/2000/svg";

function apply(el, attrs, children) {
  if (attrs) {
    for (const [key, value] of Object.entries(attrs)) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "text") el.textContent = String(value);
      else if (key === "style" && typeof value === "object") Object.assign(el.style, value);
      else if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
      else el.setAttribute(key, value === true ? "" : String(value));
    }
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    el.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return el;
}

/** An HTML element: h("div", {class: "x", text: "..."}, child, ...). */
export function h(tag, attrs, ...children) {
  return apply(document.createElement(tag), attrs, children);
}

/** An SVG element. */
export function s(tag, attrs, ...children) {
  return apply(document.createElementNS(SVG_NS, tag), attrs, children);
}

/** Set an element's text only if it changed (no DOM write otherwise). */
export function setText(el, text) {
  if (el.textContent !== text) el.textContent = text;
}
