// AotView: a forward graph and the backward graph derived from it ahead of time, side by side,
// with the derivation replayed step by step and the memory plan as live ranges (anywidget AFM).
//
// The document (minigrad/aot/document.py) lists every drawn node with the derivation step that
// created it (forward nodes: none, they exist from the start). Frame k shows steps 0..k: a
// node exists when its step is <= k. The picture is laid out once; a step only restyles it.
import { h, s, setText } from "../ui/dom.js";
import { injectStyles } from "../ui/inject-styles.js";
import { GraphPane, now, zoomControls } from "./common.js";
import { PlanStrip } from "./aot-plan-strip.js";
import AOT_CSS from "./aot-view.css";
import { Player } from "../ui/player.js";
import { stepText } from "../trace/step-numbers.js";
import { shapeText } from "../text/format.js";
import { derivedName } from "../ui/a11y.js";

const PHASE_HINT = {
  captured: "the forward graph as captured; no backward operation derived yet",
  derive: "each step applies one forward operation's backward rule, from the loss back to the inputs",
  done: "the backward graph is complete; the saved tensors are the forward tensors it reads",
};
const NODE_CLASSES = ["mg-future", "mg-current", "mg-new"];
const EDGE_CLASSES = ["mg-future", "mg-flow", "mg-using"];

function injectAotStyles(el) {
  injectStyles(el);
  const root = el && el.getRootNode ? el.getRootNode() : document;
  const owner = root && root.nodeType === 11 ? root : document;
  const mark = `minigrad-aot-${__MINIGRAD_WIDGETS_VERSION__}`;
  if (owner.querySelector && owner.querySelector(`style[data-minigrad="${mark}"]`)) return;
  const style = document.createElement("style");
  style.setAttribute("data-minigrad", mark);
  style.textContent = AOT_CSS;
  (root && root.nodeType === 11 ? root : document.head || document.documentElement).appendChild(style);
}

/** The document's nodes by id, its edges, and which step created what. */
export function indexDocument(doc) {
  const d = doc && typeof doc === "object" ? doc : {};
  const nodes = new Map();
  for (const n of d.nodes || []) nodes.set(n.id, n);
  const steps = Array.isArray(d.steps) ? d.steps : [];
  const edges = Array.isArray(d.edges) ? d.edges : [];
  const readers = new Map(); // node id -> backward ops that read it through saved./directly
  for (const e of edges) {
    if (e.kind !== "saved" && e.kind !== "param") continue;
    if (!readers.has(e.source)) readers.set(e.source, []);
    readers.get(e.source).push({ op: e.target, kind: e.kind });
  }
  return { doc: d, nodes, edges, steps, readers };
}

/** What frame k shows: which nodes exist, the forward op whose rule runs, the nodes it emitted. */
export function frameState(index, k) {
  const step = index.steps[k] || null;
  const exists = (id) => {
    const n = index.nodes.get(id);
    return !!n && (n.graph !== "backward" || (typeof n.step === "number" && n.step <= k));
  };
  const fresh = new Set();
  for (const n of index.nodes.values()) if (n.graph === "backward" && n.step === k) fresh.add(n.id);
  const phase = k <= 0 ? "captured" : k >= index.steps.length - 1 ? "done" : "derive";
  return { k, step, exists, fresh, current: step && step.op ? step.op : null, phase };
}

function legend() {
  const item = (cls, text, shape) => {
    const svg = s("svg", { width: "30", height: "16", viewBox: "0 0 30 16", "aria-hidden": "true" });
    if (shape === "line") svg.append(s("line", { class: `mg-sw ${cls}`, x1: "2", y1: "8", x2: "28", y2: "8" }));
    else if (shape === "ellipse") svg.append(s("ellipse", { class: `mg-sw ${cls}`, cx: "15", cy: "8", rx: "12", ry: "6.5" }));
    else svg.append(s("rect", { class: `mg-sw ${cls}`, x: "3", y: "2", width: "24", height: "12", rx: "2" }));
    return h("li", { "data-legend": cls }, svg, h("span", { text }));
  };
  return h(
    "ul",
    { class: "mg-legend", "aria-label": "legend" },
    item("mg-sw-data", "input"),
    item("mg-sw-param", "parameter"),
    item("mg-sw-intermediate", "activation"),
    item("mg-sw-output", "loss"),
    item("mg-sw-op", "forward op", "ellipse"),
    item("mg-sw-bwop", "backward op", "ellipse"),
    item("mg-sw-accum", "fan-out sum", "ellipse"),
    item("mg-sw-grad", "gradient"),
    item("mg-sw-nograd", "no gradient (greyed)"),
    item("mg-sw-saved", "saved. read", "line"),
    item("mg-sw-paramread", "parameter read", "line"),
  );
}

function describe(node) {
  if (!node) return "";
  const where = node.graph === "backward" ? "backward" : "forward";
  return node.type === "op" ? `${where} op ${node.label}` : `${where} tensor ${node.label}`;
}

function inspector(container, index, id, state, why, onPick) {
  const node = id ? index.nodes.get(id) : null;
  if (!node) {
    container.replaceChildren(h("div", { class: "mg-muted mg-inspector-empty", text: "Point at a node to see what it is, which rule made it and what it reads." }));
    return;
  }
  const dl = h("dl");
  const row = (term, ...content) => dl.append(h("dt", { text: term }), h("dd", null, ...content));
  const link = (target) => {
    const n = index.nodes.get(target);
    return h("button", { type: "button", class: "mg-link", "data-node": target, text: n ? n.label : target, onclick: () => onPick(target) });
  };
  const links = (ids) => (ids && ids.length ? h("span", null, ...ids.flatMap((x, i) => (i ? [", ", link(x)] : [link(x)]))) : h("span", { class: "mg-muted", text: "none" }));
  if (node.text) row("IR", h("code", { text: node.text }));
  if (node.type === "op") {
    row("inputs", links(node.inputs));
    row("outputs", links(node.outputs));
    if (node.attrs && Object.keys(node.attrs).length) row("attrs", h("code", { text: JSON.stringify(node.attrs) }));
    if (node.graph === "backward") {
      row("made by", h("span", { text: node.kind === "accumulate" ? "fan-out accumulation (a sum of the pieces)" : `the rule of ${node.rule || "?"}` }), node.from ? h("span", null, " for ", link(node.from)) : null);
      const saved = (node.reads_saved || []).map((name) => `saved.${name}`);
      row("saved reads", h("span", { text: saved.length ? saved.join(", ") : "none" }));
      row("status", h("span", { text: state.exists(id) ? (state.fresh.has(id) ? "emitted in this step" : "emitted") : "not derived yet" }));
    } else if (node.needs_grad === false) {
      row("backward", h("span", { class: "mg-muted", text: "no rule runs: none of its outputs needs a gradient" }));
    }
  } else {
    if (node.shape) row("shape", h("span", { text: `${shapeText(node.shape)} ${node.dtype || ""}` }));
    if (node.why_no_grad) row("gradient", h("span", { class: "mg-muted", text: `none: ${node.why_no_grad}` }));
    const readers = index.readers.get(id) || [];
    if (readers.length) row("read by backward", links(readers.map((r) => r.op)));
    if (node.saved) row("saved", h("span", { text: "yes: kept from forward until backward has read it" }));
  }
  container.replaceChildren(
    h(
      "div",
      { class: "mg-inspector-head" },
      h("span", { class: `mg-kind mg-kind-${node.type === "op" ? "op" : node.role || "intermediate"}`, text: describe(node).split(" ").slice(0, -1).join(" ") }),
      h("strong", { class: "mg-inspector-label", text: node.label }),
      h("span", { class: "mg-muted", text: why ? ` · ${why}` : "" }),
    ),
    dl,
  );
}

class AotView extends Player {
  constructor({ model, el, host }) {
    super();
    this.t0 = now();
    this.model = model;
    this.el = el;
    injectAotStyles(el);
    this.index = indexDocument(model.get("trace"));
    this.shown = -1;
    this.state = null;
    this.hovered = null;
    this.pinned = null;
    this.items = null;
    this.pane = new GraphPane({
      model,
      host,
      el,
      t0: this.t0,
      onInspect: (id, how) => {
        if (how === "click") this.pinned = id && id !== this.pinned ? id : null;
        else this.hovered = id;
        this.inspect();
      },
      onMounted: (canvas) => this.bind(canvas),
    });
    this.plan = new PlanStrip({ onPick: (id) => this.pick(id) });
    this.build();
    this.plan.build(this.index.doc.plan);
    const start = model.get("frame");
    this.show(typeof start === "number" ? start : 0);
    model.on("change:frame", () => this.show(model.get("frame")));
    model.on("change:dot", () => this.redraw());
    model.on("change:message", () => this.redraw());
    model.on("change:trace", () => {
      this.index = indexDocument(model.get("trace"));
      this.plan.build(this.index.doc.plan);
      this.redraw(true);
      this.show(this.shown, { force: true });
    });
    this.redraw();
  }

  build() {
    this.buildTransport();
    this.counter = h("span", { class: "mg-counter" });
    this.phase = h("span", { class: "mg-phase" });
    this.phaseHint = h("span", { class: "mg-phase-hint mg-muted" });
    this.title = h("div", { class: "mg-title" });
    this.rule = h("span", { class: "mg-rule" });
    this.sentence = h("ol", { class: "mg-sentence", "aria-live": "polite" });
    this.inspector = h("div", { class: "mg-inspector", "aria-live": "polite" });
    const saves = this.index.doc.save || [];
    this.savesText = `required saves (${saves.length}): ${saves.length ? saves.join(", ") : "none"}`;
    this.saves = h("div", { class: "mg-saves" });
    const t = this.index.doc.title;
    this.title.textContent = typeof t === "string" ? t : "";
    this.title.hidden = !this.title.textContent;
    this.root = h(
      "div",
      { class: "mg-root mg-aotview", tabindex: "0", "data-lm-suppress-shortcuts": "true", "aria-label": "ahead-of-time derivation" },
      h("div", { class: "mg-header" }, this.title, h("span", { class: "mg-phasebox" }, this.phase, this.phaseHint), zoomControls(this.pane.canvas)),
      h("div", { class: "mg-controls", role: "toolbar", "aria-label": "stepping" }, ...Object.values(this.buttons), this.speed, this.slider, this.counter),
      h("div", { class: "mg-stepbox" }, this.rule, this.sentence),
      h("div", { class: "mg-body" }, this.pane.canvas.el, h("div", { class: "mg-side" }, this.inspector, this.saves, legend())),
      this.plan.el,
    );
    this.root.addEventListener("keydown", (e) => this.key(e));
    this.el.replaceChildren(this.root);
  }

  redraw(force = false) {
    this.items = null;
    this.pane.show({ dot: this.model.get("dot"), message: this.model.get("message"), index: this.index, force });
  }

  /** Match the drawn SVG with the document, label it for screen readers, paint the frame. */
  bind(canvas) {
    this.items = [];
    for (const [id, record] of canvas.nodes) {
      const node = this.index.nodes.get(id);
      if (!node) continue;
      this.items.push({ id, node, g: record.g, flags: 0, name: null });
    }
    this.edgeItems = [];
    this.index.edges.forEach((e, k) => {
      const g = canvas.edges[k];
      if (g) this.edgeItems.push({ e, g, flags: 0 });
    });
    if (this.state) this.paint();
  }

  paint() {
    const st = this.state;
    if (!this.items || !st) return;
    const write = (el, classes, before, after) => {
      for (let i = 0; i < classes.length; i++) if ((before ^ after) & (1 << i)) el.classList.toggle(classes[i], (after & (1 << i)) !== 0);
    };
    const savesKnown = this.savesKnown();
    for (const item of this.items) {
      let f = st.exists(item.id) ? 0 : 1;
      if (item.id === st.current) f |= 2;
      if (st.fresh.has(item.id)) f |= 4;
      if (f !== item.flags) write(item.g, NODE_CLASSES, item.flags, f), (item.flags = f);
      // The name says what the picture shows (a11y.js); saves only once the derivation found them.
      const node = item.node;
      const name = derivedName(describe(node), {
        future: (f & 1) !== 0,
        current: (f & 2) !== 0,
        fresh: (f & 4) !== 0,
        noGrad: node.needs_grad === false || !!node.why_no_grad,
        saved: !!node.saved && savesKnown,
      });
      if (name !== item.name) item.g.setAttribute("aria-label", (item.name = name));
    }
    // The graph's Tab stop is the op whose rule runs (or what it emitted) until the keyboard moves it.
    const shown = st.current || [...st.fresh][0];
    if (shown && this.pane.canvas.follow) this.pane.canvas.follow(shown);
    for (const item of this.edgeItems) {
      const { source, target, kind } = item.e;
      let f = st.exists(source) && st.exists(target) ? 0 : 1;
      if (kind === "input" && target === st.current) f |= 2;
      if ((kind === "saved" || kind === "param") && st.fresh.has(target)) f |= 4;
      if (f !== item.flags) write(item.g, EDGE_CLASSES, item.flags, f), (item.flags = f);
    }
  }

  get last() {
    return Math.max(0, this.index.steps.length - 1);
  }

  show(k, { echo = false, force = false } = {}) {
    const t = now();
    const frame = Math.max(0, Math.min(this.last, Number.isFinite(k) ? Math.round(k) : 0));
    if (frame === this.shown && !force) return;
    this.shown = frame;
    this.state = frameState(this.index, frame);
    this.paint();
    this.update();
    this.el.dataset.lastStepMs = (now() - t).toFixed(2);
    this.el.dataset.frame = String(frame);
    if (echo && this.model.get("frame") !== frame) {
      this.model.set("frame", frame);
      this.model.save_changes();
    }
    const reveal = this.state.current || [...this.state.fresh][0];
    if (reveal && !this.hovered && this.pane.mounted && typeof requestAnimationFrame === "function") requestAnimationFrame(() => this.pane.canvas.reveal(reveal));
  }

  update() {
    const st = this.state;
    const n = this.index.steps.length;
    if (n === 0) {
      setText(this.counter, "no derivation steps");
      for (const b of Object.values(this.buttons)) b.disabled = true;
      return;
    }
    setText(this.counter, stepText(st.k, n - 1));
    setText(this.phase, st.phase);
    this.phase.dataset.phase = st.phase;
    setText(this.phaseHint, PHASE_HINT[st.phase] || "");
    this.slider.max = String(n - 1);
    if (this.slider.value !== String(st.k)) this.slider.value = String(st.k);
    const step = st.step || {};
    setText(this.rule, step.rule ? `rule: ${step.rule}` : step.kind || "");
    this.rule.dataset.kind = step.kind || "";
    const lines = [h("li", { class: `mg-ev mg-ev-${step.kind || "step"}`, text: step.text || step.kind || "" })];
    for (const id of step.emitted || []) {
      const node = this.index.nodes.get(id);
      if (node && node.type === "op") lines.push(h("li", { class: "mg-ev mg-ev-emit", "data-node": id, text: `emits ${node.text || node.label}` }));
    }
    this.sentence.replaceChildren(...lines);
    // The save list is a result of the derivation: shown from the step that finds it, not before
    // (so are the saved tensors' outlines: styles in aot-styles.css).
    const found = this.index.steps.findIndex((s) => s.kind === "required_saves");
    const known = this.savesKnown();
    this.root.classList.toggle("mg-saves-known", known);
    setText(this.saves, known ? this.savesText : `required saves: found at step ${found}, once every rule has run`);
    this.saves.classList.toggle("mg-muted", !known);
    this.buttons.first.disabled = this.buttons.back.disabled = st.k <= 0;
    this.buttons.step.disabled = this.buttons.last.disabled = st.k >= n - 1;
    this.inspect();
  }

  /** Has the shown step reached the one that finds the required saves? */
  savesKnown() {
    const found = this.index.steps.findIndex((s) => s.kind === "required_saves");
    return found < 0 || (this.state !== null && this.state.k >= found);
  }

  pick(id) {
    this.pinned = id;
    this.inspect();
  }

  inspect() {
    if (!this.state) return;
    const id = this.hovered || this.pinned || this.state.current;
    const why = id === null ? "" : id === this.hovered && id !== this.pinned ? "under the pointer" : id === this.pinned ? "pinned: click it again to unpin" : "this step";
    inspector(this.inspector, this.index, id, this.state, why, (picked) => this.pick(picked));
    this.plan.highlight(id);
  }

  dispose() {
    this.disposePlayer();
    this.pane.dispose();
  }
}

export function renderAotView({ model, el, host }) {
  const view = new AotView({ model, el, host });
  return () => view.dispose();
}

export default { render: renderAotView };
