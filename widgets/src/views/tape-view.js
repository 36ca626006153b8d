// TapeView: a slot tape's table beside its instruction list, backward one instruction per step
// (anywidget AFM).
//
// The document (minigrad/tape/document.py) holds the table after forward and then one small
// delta per frame: the seed, then each instruction backward runs (grads written, use counts
// changed, slots freed). A frame is reached by folding the deltas, so back, first, the slider
// and play run here. Past the last frame, while `live`, the kernel is asked to run one more
// instruction ("advance") or all of them ("finish") and answers with an "append" message.
import { h, setText } from "../ui/dom.js";
import { injectStyles } from "../ui/inject-styles.js";
import { afterPaint, now } from "./common.js";
import { values as showValues, shapeText } from "../text/format.js";
import { VirtualRows } from "../ui/virtual-rows.js";
import { TapeState } from "../trace/tape-replay.js";
import TAPE_CSS from "./tape-view.css";
import { Player } from "../ui/player.js";
import { stepText } from "../trace/step-numbers.js";

const ROW_HEIGHT = 21; // px: tape-view.css gives .mg-row and the instruction items this height
const HEAD_HEIGHT = 23; // the table's sticky header
const MARK = `minigrad-tape-${__MINIGRAD_WIDGETS_VERSION__}`;

function injectTapeStyles(el) {
  injectStyles(el);
  const root = el.getRootNode ? el.getRootNode() : document;
  const shadow = root && root.nodeType === 11;
  const owner = shadow ? root : document;
  if (owner.querySelector(`style[data-minigrad="${MARK}"]`)) return;
  const style = h("style", { "data-minigrad": MARK, text: TAPE_CSS });
  (shadow ? root : document.head || document.documentElement).appendChild(style);
}

class TapeView extends Player {
  constructor({ model, el }) {
    super();
    this.t0 = now();
    this.model = model;
    this.el = el;
    injectTapeStyles(el);
    this.doc = this.copyDoc(model.get("trace"));
    this.state = new TapeState(this.doc);
    this.shown = -1;
    this.wanted = null;
    this.marks = { position: null, using: new Set(), writing: null, written: new Set() };
    // Each list is one Tab stop (roving tabindex): the row the step shows, until the keyboard
    // moves inside the list (then the row it moved to).
    this.tabs = { slot: { at: null, follow: 0 }, instr: { at: null, follow: 0 } };
    this.build();
    this.buildTable();
    this.show(model.get("frame"), { force: true });
    this.listen();
    afterPaint(() => {
      if (!this.disposed) this.el.dataset.firstPaintMs = (now() - this.t0).toFixed(1);
    });
  }

  copyDoc(doc) {
    const d = doc && doc.slots ? doc : { slots: { kinds: [], names: [], requires_grad: [], shapes: [], values: [], grads: [], uses: [] }, instrs: [], rules: {}, frames: [], output: 0 };
    return { ...d, frames: [...(d.frames || [])] };
  }

  // -- construction --------------------------------------------------------------------------
  build() {
    this.buildTransport({ step: "one instruction (Right arrow)" });
    this.counter = h("span", { class: "mg-counter" });
    this.live = h("span", { class: "mg-live", hidden: true, text: "live" });
    this.status = h("span", { class: "mg-status", role: "status" });
    this.title = h("div", { class: "mg-title" });
    this.sentence = h("ol", { class: "mg-sentence", "aria-live": "polite" });
    this.slotsPane = h("div", { class: "mg-pane mg-slots-pane" });
    this.instrsPane = h("div", { class: "mg-pane mg-instrs-pane" });
    const b = this.buttons;
    this.root = h(
      "div",
      { class: "mg-root mg-tape", tabindex: "0", "data-lm-suppress-shortcuts": "true", "aria-label": "tape view" },
      h("div", { class: "mg-header" }, this.title, this.live),
      h("div", { class: "mg-controls", role: "toolbar", "aria-label": "stepping" }, b.first, b.back, b.step, b.last, b.play, this.speed, this.slider, this.counter),
      h("div", { class: "mg-stepbox" }, this.sentence, this.status),
      h("div", { class: "mg-tape-body" }, this.slotsPane, this.instrsPane),
      h(
        "div",
        { class: "mg-tape-legend" },
        h("span", { text: "orange: the current instruction and the slots it reads" }),
        h("span", { text: "teal grad: written at this step" }),
        h("span", { text: "grey, struck: freed (no use left)" }),
        h("span", { text: "∅ const: no grad needed, so its op was not recorded" }),
      ),
    );
    this.root.addEventListener("keydown", (e) => this.key(e));
    this.el.replaceChildren(this.root);
  }

  label(slot) {
    const name = this.doc.slots.names[slot];
    return name ? `s${slot} (${name})` : `s${slot}`;
  }

  /** The slot table and the instruction list: only the rows in view exist (virtual-rows.js). */
  buildTable() {
    if (this.slotRows) this.slotRows.dispose();
    if (this.instrRows) this.instrRows.dispose();
    const s = this.doc.slots;
    const head = h(
      "div",
      { class: "mg-row mg-head", role: "row", "aria-rowindex": "1" },
      ...["slot", "name", "kind", "value", "grad", "uses left", "req. grad"].map((t) => h("span", { role: "columnheader", text: t })),
      h("span", { class: "mg-sr", role: "columnheader", text: "state" }), // (what the colours show, in words)
    );
    this.slotRows = new VirtualRows({
      pane: this.slotsPane,
      count: s.kinds.length,
      rowHeight: ROW_HEIGHT,
      className: "mg-slots-body",
      make: (i) => this.makeSlotRow(i),
      paint: (i, el) => this.paintSlotRow(i, el),
    });
    // Only the rows in view exist: aria-rowcount and each row's aria-rowindex say where they are.
    this.slotRows.body.setAttribute("role", "rowgroup");
    this.slotRows.body.addEventListener("keydown", (e) => this.rowKey(e, "slot"));
    this.slotsPane.replaceChildren(h("div", { class: "mg-slots", role: "table", "aria-label": "slots", "aria-rowcount": String(s.kinds.length + 1) }, head, this.slotRows.body));
    this.instrRows = new VirtualRows({
      pane: this.instrsPane,
      count: this.doc.instrs.length,
      rowHeight: ROW_HEIGHT,
      make: (p) =>
        h(
          "li",
          { "data-instr": String(p), tabindex: "-1", "aria-posinset": String(p + 1), "aria-setsize": String(this.doc.instrs.length) },
          h("span", { class: "mg-pos", text: `#${p}` }),
          this.instrText(this.doc.instrs[p]),
          h("span", { class: "mg-sr" }),
        ),
      paint: (p, el) => {
        const done = this.state.done.has(p);
        const current = p === this.marks.position;
        el.classList.toggle("mg-done", done);
        el.classList.toggle("mg-current", current);
        if (current) el.setAttribute("aria-current", "step");
        else el.removeAttribute("aria-current");
        setText(el.lastChild, current ? ": running now" : done ? ": done" : ": not run yet");
        el.tabIndex = p === this.tabs.instr.stop ? 0 : -1;
      },
    });
    this.instrRows.body.setAttribute("role", "none"); // (the items belong to the list)
    this.instrRows.body.addEventListener("keydown", (e) => this.rowKey(e, "instr"));
    const list = h("ol", { class: "mg-instrs", "aria-label": "instructions" }, this.instrRows.body);
    if (!this.doc.instrs.length) list.append(h("li", { class: "mg-empty", text: "no instruction recorded (nothing requires grad)" }));
    this.instrsPane.replaceChildren(list);
    this.root.dataset.slots = String(s.kinds.length);
    this.root.dataset.instrs = String(this.doc.instrs.length);
  }

  makeSlotRow(i) {
    const s = this.doc.slots;
    const kind = s.kinds[i];
    const shape = s.shapes[i] && s.shapes[i].length ? ` ${shapeText(s.shapes[i])}` : "";
    const cell = (cls, text) => h("span", { class: cls, role: "cell", text });
    return h(
      "div",
      { "data-slot": String(i), class: `mg-row mg-kind-${kind}`, role: "row", "aria-rowindex": String(i + 2), tabindex: "-1" },
      cell("mg-slot", `s${i}`),
      h("span", { class: "mg-name", role: "cell", text: s.names[i] || "", title: s.names[i] || "" }),
      h("span", { role: "cell" }, h("span", { class: "mg-kind", text: kind, title: kind === "const" ? "const: requires no grad; an op whose inputs are all const records no instruction" : kind })),
      h("span", { class: "mg-value", role: "cell", text: s.values[i] ? showValues(s.values[i], undefined, 4) + shape : "(freed)", title: s.values[i] ? showValues(s.values[i], undefined, 4) + shape : "" }),
      cell("mg-grad", ""),
      cell("mg-uses", ""),
      cell("mg-rg", s.requires_grad[i] ? "yes" : "no"),
      cell("mg-sr", ""),
    );
  }

  /** Bring one slot row up to the shown frame: its grad, use count and marks. */
  paintSlotRow(i, el) {
    const st = this.state;
    const m = this.marks;
    const grad = st.grads[i];
    const has = grad !== null && grad !== undefined;
    setText(el.children[4], has ? showValues(grad, undefined, 4) : "—");
    setText(el.children[5], String(st.uses[i]));
    const c = el.classList;
    c.toggle("mg-has-grad", has);
    c.toggle("mg-freed", st.freed[i] === 1);
    c.toggle("mg-using", m.using.has(i));
    c.toggle("mg-writing", i === m.writing);
    c.toggle("mg-grad-new", m.written.has(i));
    setText(el.lastChild, slotState(i, m, st));
    el.tabIndex = i === this.tabs.slot.stop ? 0 : -1;
  }

  /** Where a list's Tab stop is: the row the keyboard moved to while focus is in the list,
   * else the row the step shows. Kept in the DOM even when scrolled away (virtual-rows.js). */
  placeStops() {
    const focus = this.root.getRootNode ? this.root.getRootNode().activeElement : document.activeElement;
    for (const [which, rows, pane] of [["slot", this.slotRows, this.slotsPane], ["instr", this.instrRows, this.instrsPane]]) {
      const tab = this.tabs[which];
      const inside = tab.at !== null && focus && pane.contains(focus);
      tab.stop = Math.max(0, Math.min(rows.count - 1, inside ? tab.at : tab.follow));
      rows.keep = rows.count ? tab.stop : null;
    }
  }

  /** Up / Down / Page Up / Page Down / Home / End move between a list's rows (Left and Right
   * still step backward, as everywhere in the view). */
  rowKey(e, which) {
    const rows = which === "slot" ? this.slotRows : this.instrRows;
    const n = rows.count;
    if (!n || e.altKey || e.ctrlKey || e.metaKey) return;
    const tab = this.tabs[which];
    const at = tab.stop ?? 0;
    const page = Math.max(1, Math.floor((rows.pane.clientHeight || 200) / ROW_HEIGHT) - 2);
    const to = { ArrowDown: at + 1, ArrowUp: at - 1, PageDown: at + page, PageUp: at - page, Home: 0, End: n - 1 }[e.key];
    if (to === undefined) return;
    e.preventDefault(); // (the view's own keys: Home and End would jump to the first / last step)
    tab.at = tab.stop = Math.max(0, Math.min(n - 1, to));
    rows.keep = tab.stop;
    rows.reveal(tab.stop, which === "slot" ? HEAD_HEIGHT : 0);
    rows.repaint();
    const el = rows.rendered.get(tab.stop);
    if (el) el.focus({ preventScroll: true });
  }

  instrText(ins) {
    const attrs = Object.entries(ins.attrs || {}).map(([k, v]) => `${k}=${v}`);
    return `s${ins.output} = ${ins.op}(${[...ins.inputs.map((i) => `s${i}`), ...attrs].join(", ")})`;
  }

  listen() {
    const m = this.model;
    m.on("change:frame", () => {
      this.settle();
      const k = m.get("frame");
      if (typeof k === "number" && k > this.last) this.wanted = k;
      this.show(k);
      this.continuePlaying();
    });
    m.on("change:live", () => this.update());
    m.on("change:options", () => this.update());
    m.on("change:trace", () => this.replaceDoc());
    m.on("msg:custom", (content) => this.message(content));
    if (m.get("live")) m.send({ kind: "hello", frames: this.doc.frames.length });
  }

  replaceDoc() {
    const incoming = this.copyDoc(this.model.get("trace"));
    if (incoming.frames.length === this.doc.frames.length && incoming.instrs.length === this.doc.instrs.length) return;
    this.doc = incoming;
    this.state = new TapeState(this.doc);
    this.buildTable();
    this.show(this.model.get("frame"), { force: true });
  }

  message(content) {
    if (content && content.kind === "error") {
      this.settle();
      this.pause();
      setText(this.status, String(content.text || "the kernel raised an error"));
      return;
    }
    if (!content || content.kind !== "append" || !Array.isArray(content.frames)) return;
    this.doc.frames.push(...content.frames);
    if (content.done) this.doc.done = true;
    this.settle();
    const k = this.wanted !== null ? this.wanted : this.shown;
    this.wanted = null;
    this.show(k, { force: true });
    this.continuePlaying();
  }

  // -- moving --------------------------------------------------------------------------------
  get last() {
    return this.doc.frames.length;
  }

  get isLive() {
    return !!this.model.get("live");
  }

  askText(kind) {
    return kind === "finish" ? "running the rest of backward in the kernel…" : "running one instruction in the kernel…";
  }

  // -- showing a frame -----------------------------------------------------------------------
  show(k, { echo = false, force = false } = {}) {
    const t = now();
    const frame = Math.max(0, Math.min(typeof k === "number" ? k : 0, this.last));
    if (frame === this.shown && !force) return;
    this.shown = frame;
    this.state.seek(frame);
    this.paint();
    this.update();
    this.el.dataset.lastStepMs = (now() - t).toFixed(2);
    this.el.dataset.frame = String(frame);
    if (echo && this.model.get("frame") !== frame) {
      this.model.set("frame_seq", (this.model.get("frame_seq") || 0) + 1);
      this.model.set("frame", frame);
      this.model.save_changes();
    }
  }

  /** What the shown frame marks (its instruction, the slots it reads and writes), then the
   * rows in view repainted; the current instruction and its first written slot are revealed. */
  paint() {
    const delta = this.state.delta(this.shown);
    const ins = delta && delta.position !== null ? this.doc.instrs[delta.position] : null;
    this.marks = {
      position: ins ? delta.position : null,
      using: new Set(ins ? ins.inputs : []),
      writing: ins ? ins.output : null,
      written: new Set(delta ? delta.grads.map(([slot]) => slot) : []),
    };
    const first = delta && delta.grads.length ? delta.grads[0][0] : ins ? ins.output : null;
    if (ins) this.tabs.instr.follow = delta.position;
    if (first !== null) this.tabs.slot.follow = first;
    this.placeStops();
    if (ins) this.instrRows.reveal(delta.position);
    else this.instrRows.render();
    if (first !== null) this.slotRows.reveal(first, HEAD_HEIGHT);
    else this.slotRows.render();
    this.slotRows.repaint();
    this.instrRows.repaint();
  }

  /** The sentence, counter, slider and buttons. */
  update() {
    const n = this.last;
    const frame = this.shown;
    const live = this.isLive;
    const title = (this.model.get("options") || {}).title || this.doc.title || "";
    setText(this.title, title);
    this.title.hidden = !title;
    this.live.hidden = !live;
    setText(this.counter, stepText(frame, n, live));
    this.slider.max = String(n);
    if (this.slider.value !== String(frame)) this.slider.value = String(frame);
    const lines = this.describe(frame);
    const key = `${frame}/${n}/${live}`;
    if (this.sentenceKey !== key) {
      this.sentenceKey = key;
      this.sentence.replaceChildren(...lines.map((text, i) => h("li", { class: i === 0 ? "mg-ev mg-ev-apply" : "mg-ev", text })));
    }
    const busy = !!this.awaiting;
    const atEnd = frame >= n && !live;
    this.buttons.first.disabled = frame <= 0;
    this.buttons.back.disabled = frame <= 0;
    this.buttons.step.disabled = busy || atEnd;
    this.buttons.last.disabled = busy || atEnd;
  }

  /** One sentence per step, made of the frame's delta (names are text, never markup). */
  describe(frame) {
    const doc = this.doc;
    const s = doc.slots;
    if (frame === 0) {
      const consts = s.kinds.filter((k) => k === "const").length;
      const constText = consts === 1 ? "1 const slot needs" : `${consts} const slots need`;
      return [
        `Forward is recorded: ${s.kinds.length} slots, ${doc.instrs.length} instructions; ${constText} no grad (ops on them only were not recorded).`,
        `Backward starts from ${this.label(doc.output)} and runs the instructions in reverse.`,
      ];
    }
    const delta = doc.frames[frame - 1];
    if (delta.position === null) {
      return [`Seed: grad of ${this.label(doc.output)} = 1. Backward starts here.`];
    }
    const ins = doc.instrs[delta.position];
    const lines = [`Instruction #${delta.position}: ${this.instrText(ins)}`];
    const rule = doc.rules && doc.rules[ins.op];
    if (rule) lines.push(`backward rule of ${ins.op}: ${rule}  (a, b: inputs, y: output)`);
    if (delta.grads.length) lines.push(`grads written: ${delta.grads.map(([slot, g]) => `${this.label(slot)} = ${showValues(g, undefined, 4)}`).join("; ")}`);
    else if (this.state.grads[ins.output] === null || this.state.grads[ins.output] === undefined)
      lines.push(`no grad written: ${this.label(ins.output)} has no grad (it does not lead to ${this.label(doc.output)})`);
    else lines.push("no grad written (no input requires grad)");
    if (delta.uses.length) lines.push(`uses left: ${delta.uses.map(([slot, c]) => `${this.label(slot)} → ${c}`).join(", ")}`);
    if (delta.freed.length) lines.push(`freed (no use left): ${delta.freed.map((slot) => this.label(slot)).join(", ")}`);
    if (frame === this.last && doc.done) lines.push("Backward is over: every instruction has run.");
    return lines;
  }

  dispose() {
    this.disposePlayer();
    this.slotRows.dispose();
    this.instrRows.dispose();
  }
}

/** A slot row's state in words: what its colours and marks show at this step. */
function slotState(i, marks, state) {
  const parts = [];
  if (i === marks.writing) parts.push("output of the current instruction");
  if (marks.using.has(i)) parts.push("read by the current instruction");
  if (marks.written.has(i)) parts.push("gradient written at this step");
  if (state.freed[i] === 1) parts.push("freed: no use left");
  return parts.join("; ");
}

export function renderTapeView({ model, el }) {
  const view = new TapeView({ model, el });
  return () => view.dispose();
}

export default { render: renderTapeView };
