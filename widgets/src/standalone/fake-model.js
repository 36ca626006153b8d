// A stand-in for an anywidget model, so that the views run on a page without Jupyter (the
// HTML export): get/set/on/off/send/save_changes, with Backbone-like "change:<name>" events.
export class FakeModel {
  constructor(state = {}) {
    this.state = { ...state };
    this.listeners = new Map();
    this.sent = [];
  }

  get(name) {
    return this.state[name];
  }

  set(name, value) {
    const before = this.state[name];
    this.state[name] = value;
    if (before !== value) this.emit(`change:${name}`, value);
  }

  save_changes() {}

  /** A message to the (absent) kernel: recorded, and announced as "send" to page code. */
  send(content) {
    this.sent.push(content);
    this.emit("send", content);
  }

  /** A message from the "kernel" (page code), as anywidget's "msg:custom". */
  receive(content, buffers = []) {
    this.emit("msg:custom", content, buffers);
  }

  on(name, callback) {
    if (!this.listeners.has(name)) this.listeners.set(name, new Set());
    this.listeners.get(name).add(callback);
  }

  off(name, callback) {
    if (!name) this.listeners.clear();
    else if (!callback) this.listeners.delete(name);
    else this.listeners.get(name)?.delete(callback);
  }

  emit(name, ...args) {
    for (const callback of [...(this.listeners.get(name) || [])]) callback(...args);
  }
}
