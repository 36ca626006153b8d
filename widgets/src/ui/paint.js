// Restyling the laid-out graph for one replay state. Every node and edge keeps what it shows
// now (a bit mask of classes and its badge text); paint() computes what it should show and
// writes to the DOM only where the two differ. Nothing is searched for in the SVG.
//
// paint() looks at every node, box and edge: the plain reference, used for jumps. update()
// after a step forward looks only at what the step's events name (trace/replay.js eventNodes),
// the node the step before was about and the gradients it wrote, their edges and their boxes,
// so a step costs what it changed; test/paint.test.js checks that both leave the same picture
// after every step.
import { tagValues, values } from "../text/format.js";
import { eventNodes } from "../trace/replay.js";
import { BoxTally, boxProgress, progressText } from "../trace/scope-boxes.js";
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
    this.boxItems = new Map();
    for (const [id, box] of (fold && fold.boxes) || []) {
      const record = this.canvas.nodes.get(id);
      if (record) this.boxItems.set(id, { id, box, record, flags: record.flags || 0, badge: record.badgeShown ?? null, tag: record.tagShown ?? null });
    }
    this.tally = new BoxTally((fold && fold.boxes) || new Map(), index);
    this.items = new Map();
    for (const [id, node] of index.nodes) {
      const record = this.canvas.nodes.get(id);
      if (record) this.items.set(id, { id, node, record, flags: record.flags || 0, badge: record.badgeShown ?? null, tag: record.tagShown ?? null });
    }
    this.edgeItems = [];
    this.edgesAt = edgesByNode(index, this.canvas.edges, this.edgeItems);
    this.painted = null; // what the last paint showed: the next update() paints all of it
    this.visits = { events: 0, nodes: 0, boxes: 0, edges: 0, full: false }; // (the last paint's work)
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

  /** Everything, from the state alone (touched: the variables written in this step). */
  paint(state, touched = new Set()) {
    const ready = new Set(state.ready);
    for (const item of this.items.values()) this.paintNode(item, state, ready, touched);
    for (const item of this.boxItems.values()) this.paintBox(item, state, boxProgress(item.box, state, this.index));
    for (const item of this.edgeItems) this.paintEdge(item, state);
    this.tally.recount(state);
    this.visits = { events: 0, nodes: this.items.size, boxes: this.boxItems.size, edges: this.edgeItems.length, full: true };
    this.done(state, touched);
  }

  /**
   * The state after a step: only what its events changed when the state moved forward from
   * the one painted last, else (a jump back, a new state, a flag that every node or saved edge
   * shows: backward started or done, the graph consumed) everything.
   */
  update(state, touched = new Set()) {
    const was = this.painted;
    const ahead = was && was.state === state ? state.event - was.event : -1;
    const same = was && was.done === state.done && was.consumed === state.consumed && was.backwardStarted === state.backwardStarted;
    // (a jump over more events than the graph has nodes and edges: a full paint costs less)
    if (ahead < 0 || !same || ahead > this.index.nodes.size + this.index.edges.length) return this.paint(state, touched);
    const ids = new Set([was.current, state.current, ...was.touched, ...touched]);
    for (let i = was.event + 1; i <= state.event; i++) eventNodes(this.index.events[i], ids);
    ids.delete(null);
    const ready = { has: (id) => state.ready.includes(id) };
    const boxes = new Set();
    let edges = 0;
    for (const id of ids) {
      const item = this.items.get(id);
      if (item) this.paintNode(item, state, ready, touched);
      for (const edge of this.edgesAt.get(id) || []) this.paintEdge(edge, state);
      edges += (this.edgesAt.get(id) || []).length;
      this.tally.touch(id, state, boxes, ready);
    }
    for (const id of boxes) {
      const item = this.boxItems.get(id);
      if (item) this.paintBox(item, state, this.tally.progress(id, state));
    }
    this.visits = { events: ahead, nodes: ids.size, boxes: boxes.size, edges, full: false };
    this.done(state, touched);
  }

  /** Remember what was painted, and give the graph's Tab stop to the step's node (or its
   * closed box) until the keyboard moves it. */
  done(state, touched) {
    const { event, current, done, consumed, backwardStarted } = state;
    this.painted = { state, event, current, done, consumed, backwardStarted, touched: [...touched] };
    const shownAs = current && ((this.fold && this.fold.boxOf && this.fold.boxOf.get(current)) || current);
    if (shownAs) this.canvas.follow(shownAs);
  }

  paintNode(item, state, ready, touched) {
    const { exists, applied, grads, pending } = state;
    const { id, node, record } = item;
    const alive = exists.has(id);
    let flags = alive ? 0 : N["mg-future"];
    if (id === state.current) flags |= N["mg-current"];
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

  paintBox(item, state, p) {
    let flags = p.exists ? 0 : N["mg-future"];
    if (p.current) flags |= N["mg-current"];
    if (p.done) flags |= N["mg-done"];
    else if (p.ready) flags |= N["mg-ready"];
    const badge = state.backwardStarted && p.pending > 0 && !p.done ? String(p.pending) : null;
    const tag = progressText(p, state.backwardStarted) || null;
    this.show(item, flags, badge, tag);
  }

  paintEdge(item, state) {
    const { e, g } = item;
    const { exists, applied, current } = state;
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
}

/**
 * The drawn edges whose look a node's change can change, by node: an edge's look depends on
 * whether both ends exist and on its target (current, applied), so it is listed under its
 * target, and under its source too when the source is created after the target (no
 * writer does that today; a trace that did would still be painted right).
 */
function edgesByNode(index, drawn, items) {
  const born = new Map(); // node id -> the event that created it
  index.events.forEach((ev, i) => {
    if (ev.type === "leaf" || ev.type === "op") for (const id of [ev.node, ev.output]) if (id && !born.has(id)) born.set(id, i);
  });
  const at = new Map();
  index.edges.forEach((e, k) => {
    const g = drawn[k];
    if (!g) return;
    const item = { e, g, flags: g.__mgFlags || 0 };
    items.push(item);
    listed(at, e.target, item);
    if (!(born.get(e.source) <= born.get(e.target))) listed(at, e.source, item);
  });
  return at;
}

const listed = (map, key, value) => (map.has(key) ? map.get(key).push(value) : map.set(key, [value]));
