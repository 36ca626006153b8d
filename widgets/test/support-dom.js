// A small stand-in for the DOM, for tests of the painters (src/ui/paint.js, src/ui/memory-charts.js)
// under Node: elements keep their classes, attributes, text, style and children, and every write
// is counted (writes.n), so a test can count what a step writes, and compare two pictures.

export const writes = { n: 0 };

class FakeClassList {
  constructor() {
    this.set = new Set();
  }
  add(c) {
    writes.n++;
    this.set.add(c);
  }
  remove(c) {
    writes.n++;
    this.set.delete(c);
  }
  toggle(c, on = !this.set.has(c)) {
    writes.n++;
    if (on) this.set.add(c);
    else this.set.delete(c);
    return on;
  }
  contains(c) {
    return this.set.has(c);
  }
}

export class FakeElement {
  constructor(tag) {
    this.tagName = String(tag).toUpperCase();
    this.classList = new FakeClassList();
    this.attrs = new Map();
    this.children = [];
    this.parentElement = null;
    this.text = "";
    const style = {};
    this.style = new Proxy(style, {
      set(target, key, value) {
        writes.n++;
        target[key] = value;
        return true;
      },
    });
    this.dataset = new Proxy(
      {},
      {
        set(target, key, value) {
          writes.n++;
          target[key] = String(value);
          return true;
        },
      },
    );
  }
  setAttribute(k, v) {
    writes.n++;
    if (k === "class") this.classList.set = new Set(String(v).split(/\s+/).filter(Boolean));
    else this.attrs.set(k, String(v));
  }
  getAttribute(k) {
    return this.attrs.has(k) ? this.attrs.get(k) : null;
  }
  get textContent() {
    return this.text + this.children.map((c) => c.textContent).join("");
  }
  set textContent(t) {
    writes.n++;
    this.text = String(t);
    this.children = [];
  }
  append(...kids) {
    for (const kid of kids) {
      kid.parentElement = this;
      this.children.push(kid);
    }
  }
  insertBefore(kid, before) {
    kid.parentElement = this;
    const at = this.children.indexOf(before);
    this.children.splice(at < 0 ? this.children.length : at, 0, kid);
  }
  replaceChildren(...kids) {
    this.children = [];
    this.append(...kids);
  }
  addEventListener() {}
  contains() {
    return false;
  }
  getRootNode() {
    return { activeElement: null };
  }
  focus() {}
}

/** Install a fake `document` for the ui/ modules (h(), s() and setText create and write these). */
export function installFakeDocument() {
  globalThis.document = {
    createElement: (tag) => new FakeElement(tag),
    createElementNS: (_ns, tag) => new FakeElement(tag),
    createTextNode: (text) => Object.assign(new FakeElement("#text"), { text: String(text) }),
    activeElement: null,
  };
}

/** What an element shows: its classes (sorted), attributes, text and style, as plain data. */
export function looks(el) {
  if (!el) return null;
  return {
    classes: [...el.classList.set].sort(),
    attrs: Object.fromEntries([...el.attrs].sort()),
    text: el.textContent,
    style: { ...el.style },
    data: { ...el.dataset },
  };
}
