// Restyling the laid-out graph for one replay state. Every node and edge keeps what it shows
// now (a bit mask of classes and its badge text); paint() computes what it should show and
// writes to the DOM only where the two differ. Nothing is searched for in the SVG.
import { tagValues, values } from "../text/format.js";
import { boxProgress, progressText } from "../trace/scope-boxes.js";
import { nodeName } from "./a11y.js";

const NODE_CLASSES = [
  "mg-future", // not created yet (forward)
  "mg-current", // the node this step is about
  "mg-done", // an op whose backward has run
  "mg-ready", // an op in the ready queue
  "mg-has-grad", // a variable with a gradient
  "mg-grad-first", //   ... written once (assigned)
  "mg-grad-sum", //   ... summed into
  "mg-grad-dropped", // an intermediate gradient after backward finished
  "mg-grad-new", // written during this step
];
const EDGE_CLASSES = [
  "mg-future", // an endpoint does not exist yet
  "mg-flow", // a parent edge of the op running now: its gradients flow along it
  "mg-using", // a saved edge of the op running now: backward reads it
  "mg-released", // a saved tensor that was freed (its op ran, or the graph was consumed)
];
const bit = (list, name) => 1 << list.indexOf(name);
const N = Object.fromEntries(NODE_CLASSES.map((c) => [c, bit(NODE_CLASSES, c)]));
const E = Object.fromEntries(EDGE_CLASSES.map((c) => [c, bit(EDGE_CLASSES, c)]));

function toggle(el, classes, before, after) {
  const changed = before ^ after;
  for (let i = 0; i < classes.length; i++) {
    if (changed & (1 << i)) el.classList.toggle(classes[i], (after & (1 << i)) !== 0);
  }
}

export class StepPainter {
  constructor(canvas, index, fold = null) {
    this.canvas = canvas;
    this.bind(index, fold);
  }

  /** Match the canvas' elements with a (possibly longer) trace; fold: indexFolding(). */
  bind(index, fold = this.fold) {
    this.index = index;
    this.fold = fold;
    this.boxItems = [];
    for (const [id, box] of (fold && fold.boxes) || []) {
      const record = this.canvas.nodes.get(id);
      if (record) this.boxItems.push({ id, box, record, flags: record.flags || 0, badge: record.badgeShown ?? null, tag: record.tagShown ?? null });
    }
    this.items = [];
    for (const [id, node] of index.nodes) {
      const record = this.canvas.nodes.get(id);
      if (!record) continue;
      this.items.push({ id, node, record, flags: record.flags || 0, badge: record.badgeShown ?? null, tag: record.tagShown ?? null });
    }
    this.edgeItems = [];
    index.edges.forEach((e, k) => {
      const g = this.canvas.edges[k];
      if (g) this.edgeItems.push({ e, g, flags: g.__mgFlags || 0 });
    });
  }

  /** Write a node's (or box's) classes, badge and tag where they differ from what it shows,
   * and say the same in its accessible name. */
  show(item, flags, badge, tag, grad = null) {
    const record = item.record;
    if (flags !== item.flags || badge !== item.badge || tag !== item.tag) this.name(item, flags, badge, tag, grad);
    if (flags !== item.flags) {
      toggle(record.g, NODE_CLASSES, item.flags, flags);
      item.flags = record.flags = flags;
    }
    if (badge !== item.badge) {
      if (badge === null) record.badge.classList.add("mg-hidden");
      else {
        if (item.badge === null) record.badge.classList.remove("mg-hidden");
        record.badgeText.textContent = badge;
      }
      item.badge = record.badgeShown = badge;
    }
    if (tag !== item.tag) {
      if (tag === null) record.tag.classList.add("mg-hidden");
      else {
        if (item.tag === null) record.tag.classList.remove("mg-hidden");
        record.tagText.textContent = tag;
        const width = Math.max(20, tag.length * 5.6 + 8);
        record.tagRect.setAttribute("x", String(-width / 2));
        record.tagRect.setAttribute("width", String(width));
      }
      item.tag = record.tagShown = tag;
    }
  }

  /** The accessible name: what the classes, badge and tag show, in words (a11y.js). */
  name(item, flags, badge, tag, g) {
    const record = item.record;
    const has = (c) => (flags & N[c]) !== 0;
    const isBox = !item.node;
    // (the name gives more of the gradient than the tag's two values)
    const grad = !isBox && g && has("mg-has-grad") ? { first: has("mg-grad-first"), text: values(g.values, item.node.size, 4) } : null;
    let name = nodeName(isBox ? `scope ${record.scope}` : record.base, {
      future: has("mg-future"),
      current: has("mg-current"),
      ready: has("mg-ready"),
      done: has("mg-done"),
      pending: badge === null || isBox ? null : +badge, // (a box's tag counts its pending)
      grad,
      fresh: has("mg-grad-new"),
      dropped: has("mg-grad-dropped"),
    });
    if (isBox) name += `${tag ? `, ${tag}` : ""}: click to open it`;
    if (name !== record.name) {
      record.name = name;
      record.g.setAttribute("aria-label", name);
    }
  }

  /** touched: ids of variables that received a gradient in this step. */
  paint(state, touched = new Set()) {
    const { exists, applied, grads, pending } = state;
    const ready = new Set(state.ready);
    const current = state.current;
    for (const item of this.items) {
      const { id, node, record } = item;
      const alive = exists.has(id);
      let flags = alive ? 0 : N["mg-future"];
      if (id === current) flags |= N["mg-current"];
      let badge = null;
      let tag = null;
      if (node.type === "op") {
        if (applied.has(id)) flags |= N["mg-done"];
        else if (ready.has(id)) flags |= N["mg-ready"];
        if (alive && record.badge) {
          const count = pending.get(id);
          badge = count === undefined ? String(node.pending_count) : String(count);
        }
      } else {
        const g = grads.get(id);
        if (g) {
          flags |= N["mg-has-grad"] | (g.first ? N["mg-grad-first"] : N["mg-grad-sum"]);
          if (state.done && node.role !== "param") flags |= N["mg-grad-dropped"];
          if (touched.has(id)) flags |= N["mg-grad-new"];
          if (record.tag) tag = (g.first ? "= " : "+= ") + tagValues(g.values, node.size);
        }
      }
      this.show(item, flags, badge, tag, node.type === "op" ? null : grads.get(id));
    }
    for (const item of this.boxItems) {
      const p = boxProgress(item.box, state, this.index);
      let flags = p.exists ? 0 : N["mg-future"];
      if (p.current) flags |= N["mg-current"];
      if (p.done) flags |= N["mg-done"];
      else if (p.ready) flags |= N["mg-ready"];
      const badge = state.backwardStarted && p.pending > 0 && !p.done ? String(p.pending) : null;
      const tag = progressText(p, state.backwardStarted) || null;
      this.show(item, flags, badge, tag);
    }
    for (const item of this.edgeItems) {
      const { e, g } = item;
      let flags = exists.has(e.source) && exists.has(e.target) ? 0 : E["mg-future"];
      if (e.kind === "parent" && e.target === current) flags |= E["mg-flow"];
      if (e.kind === "saved") {
        if (e.target === current) flags |= E["mg-using"];
        else if (applied.has(e.target) || state.consumed) flags |= E["mg-released"];
      }
      if (flags !== item.flags) {
        toggle(g, EDGE_CLASSES, item.flags, flags);
        item.flags = g.__mgFlags = flags;
      }
    }
    // The graph's Tab stop is the step's node (or its closed box) until the keyboard moves it.
    const shownAs = current && ((this.fold && this.fold.boxOf && this.fold.boxOf.get(current)) || current);
    if (shownAs) this.canvas.follow(shownAs);
  }
}
