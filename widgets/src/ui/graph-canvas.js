// The graph picture: Graphviz's SVG, parsed once per layout, with its elements indexed by id
// so that later changes (stepping) only touch the elements that change.
import { h, s } from "./dom.js";
import { BOX, FRAME } from "../trace/scope-boxes.js";
import { nearestInDirection, readingOrder } from "./a11y.js";

const NUMBER = /-?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?/gi;

// Node labels are 11 units high (minigrad/widgets/dot.py); "fit" never shrinks them below
// MIN_LABEL_PX, a size still readable: a graph too big for that scrolls instead.
export const LABEL_UNITS = 11;
export const MIN_LABEL_PX = 8;

/**
 * The scale of the picture. fit "auto" (the start): the box's width, enlarging at most 1.25
 * times and shrinking to no less than 0.75 (a bigger graph scrolls), and a little smaller when
 * that makes a drawing just taller than the box fit in it; "fit": the whole graph in the box,
 * width and height, but labels no smaller than MIN_LABEL_PX; false: `scale` as set by zoom in /
 * out. box: {width, height} of the scroll box (height: its max-height); size: {w, h} of the drawing.
 */
export function zoomScale(fit, box, size, scale) {
  if (!fit) return scale;
  const byWidth = box.width > 0 ? (box.width - 4) / size.w : 1;
  const byHeight = box.height > 0 ? (box.height - 4) / size.h : Infinity;
  if (fit === "auto") {
    const auto = Math.max(0.75, Math.min(1.25, byWidth));
    return byHeight < auto && byHeight >= 0.75 ? byHeight : auto;
  }
  return Math.max(MIN_LABEL_PX / LABEL_UNITS, Math.min(1.25, byWidth, byHeight));
}

function bboxOf(elements) {
  let x1 = Infinity, y1 = Infinity, x2 = -Infinity, y2 = -Infinity;
  const add = (x, y) => {
    if (x < x1) x1 = x;
    if (x > x2) x2 = x;
    if (y < y1) y1 = y;
    if (y > y2) y2 = y;
  };
  for (const el of elements) {
    const tag = el.localName;
    if (tag === "ellipse" || tag === "circle") {
      const cx = +el.getAttribute("cx"), cy = +el.getAttribute("cy");
      const rx = +(el.getAttribute("rx") ?? el.getAttribute("r")), ry = +(el.getAttribute("ry") ?? el.getAttribute("r"));
      add(cx - rx, cy - ry);
      add(cx + rx, cy + ry);
    } else if (tag === "rect") {
      const x = +el.getAttribute("x"), y = +el.getAttribute("y");
      add(x, y);
      add(x + +el.getAttribute("width"), y + +el.getAttribute("height"));
    } else {
      const nums = (el.getAttribute(tag === "path" ? "d" : "points") || "").match(NUMBER) || [];
      for (let i = 0; i + 1 < nums.length; i += 2) add(+nums[i], +nums[i + 1]);
    }
  }
  if (x1 === Infinity) return null;
  return { x1, y1, x2, y2, cx: (x1 + x2) / 2, cy: (y1 + y2) / 2 };
}

/** Remove what a picture of a graph never needs and could misuse: scripts, foreign HTML, links. */
function sanitize(svg) {
  for (const el of svg.querySelectorAll("script, foreignObject, iframe, object, embed")) el.remove();
  for (const a of svg.querySelectorAll("a")) {
    for (const name of ["href", "xlink:href"]) {
      const value = a.getAttribute(name);
      if (value !== null && !value.startsWith("#")) a.removeAttribute(name);
    }
  }
}

/** The focused element, in a shadow root too. */
function activeIn(el) {
  const root = el && el.getRootNode ? el.getRootNode() : document;
  return (root && root.activeElement) || document.activeElement;
}

export function describeNode(node) {
  if (!node) return "";
  if (node.type === "op") return `op ${node.label}`;
  const role = { param: "parameter", data: "data", intermediate: "intermediate", output: "output" }[node.role] || "variable";
  return `${role} ${node.label}`;
}

export class GraphCanvas {
  /**
   * onInspect(id | null, how) is called when the pointer or the keyboard focus enters or leaves
   * a node ("hover", "focus"), and on a click ("click").
   */
  constructor({ onInspect, onToggle } = {}) {
    this.el = h("div", { class: "mg-graph" });
    this.onInspect = onInspect || (() => {});
    // onToggle(id): a closed scope's box ("s:...") or an open scope's frame ("c:...") was
    // clicked (or Enter was pressed on it).
    this.onToggle = onToggle || (() => {});
    this.frames = new Map(); // open scope's frame id -> <g class="cluster">
    this.svg = null;
    this.nodes = new Map(); // id -> {g, bbox, badge, badgeText, tag, tagRect, tagText}
    this.edges = []; // k -> <g> of edge e<k>
    this.scale = 1;
    this.fit = "auto";
    this.boxWidth = 0;
    this.size = null;
    this.centres = new Map(); // id -> {x, y}: where arrow keys find the next node
    this.order = []; // ids in reading order
    this.stops = new Map(); // id -> <g>: what the keyboard moves between (nodes and frames)
    this.active = null; // the stop that holds the graph's one Tab stop (roving tabindex)
  }

  showMessage(text, kind = "info") {
    this.svg = null;
    this.nodes = new Map();
    this.edges = [];
    this.el.replaceChildren(h("div", { class: `mg-message mg-message-${kind}`, role: kind === "error" ? "alert" : "status", text }));
  }

  /**
   * Put Graphviz's SVG text on the page. index: indexTrace() of the trace the DOT was made
   * from (labels for accessibility); badges / gradTags: add pending-count badges to ops and
   * gradient tags to variables (the stepper).
   */
  mount(svgText, index, { badges = false, gradTags = false, keepScale = false } = {}) {
    const doc = new DOMParser().parseFromString(svgText, "image/svg+xml");
    const root = doc.documentElement;
    if (!root || root.localName !== "svg" || doc.getElementsByTagName("parsererror").length) {
      throw new Error("Graphviz returned something that is not SVG");
    }
    // The box's width, read before the picture goes in (a read after would lay the SVG out now).
    this.boxWidth = this.el.clientWidth || this.boxWidth || 0;
    const svg = document.adoptNode(root);
    sanitize(svg);
    svg.classList.add("mg-svg");
    svg.setAttribute("role", "group");
    svg.setAttribute("tabindex", "-1"); // (Chromium would make the <svg> a Tab stop of its own)
    svg.setAttribute("aria-label", "computation graph: arrow keys move between nodes, Enter or Space does what a click does");

    const nodes = new Map();
    for (const g of svg.querySelectorAll("g.node")) {
      const id = g.getAttribute("id");
      if (!id) continue;
      // Graphviz's <title> would show the DOT name as a native tooltip: the inspector says more.
      for (const t of g.querySelectorAll("title")) t.remove();
      const shapes = g.querySelectorAll("polygon, ellipse, path, polyline, rect, circle");
      for (const el of shapes) el.classList.add("mg-shape");
      const record = { g, bbox: bboxOf(shapes) };
      const node = index && index.nodes.get(id);
      // One Tab stop for the whole graph (set below); arrow keys move between the nodes.
      g.setAttribute("tabindex", "-1");
      g.setAttribute("role", "button");
      if (id.startsWith(BOX)) {
        record.scope = id.slice(BOX.length);
        record.base = `scope ${record.scope}: click to open it`;
      } else record.base = describeNode(node) || id;
      record.name = record.base;
      g.setAttribute("aria-label", record.base);
      nodes.set(id, record);
    }
    const frames = new Map();
    for (const g of svg.querySelectorAll("g.cluster")) {
      const id = g.getAttribute("id") || "";
      for (const t of g.querySelectorAll(":scope > title")) t.remove();
      if (!id.startsWith(FRAME)) continue;
      g.setAttribute("aria-label", `frame of scope ${id.slice(FRAME.length)}: click it to close the scope`);
      g.setAttribute("role", "button");
      g.setAttribute("tabindex", "-1");
      frames.set(id, g);
    }
    const edges = [];
    for (const g of svg.querySelectorAll("g.edge")) {
      for (const t of g.querySelectorAll("title")) t.remove();
      const id = g.getAttribute("id") || "";
      if (/^e\d+$/.test(id)) edges[+id.slice(1)] = g;
    }
    for (const t of svg.querySelectorAll("g.graph > title")) t.remove();

    if (badges || gradTags) {
      for (const [id, record] of nodes) {
        const node = index && index.nodes.get(id);
        const box = record.bbox;
        if ((!node && !record.scope) || !box) continue;
        if (badges && (record.scope || node.type === "op")) {
          record.badgeText = s("text", { "text-anchor": "middle", dy: "0.35em" });
          record.badge = s(
            "g",
            { class: "mg-badge mg-hidden", "data-pending-for": id, transform: `translate(${box.x2 - 3},${box.y1 + 3})`, "aria-hidden": "true" },
            s("circle", { r: "7.5" }),
            record.badgeText,
          );
          record.g.append(record.badge);
        }
        if (gradTags && (record.scope || node.type === "variable")) {
          record.tagText = s("text", { "text-anchor": "middle", dy: "0.35em" });
          record.tagRect = s("rect", { x: "-10", y: "-6.5", width: "20", height: "13", rx: "3" });
          record.tag = s(
            "g",
            { class: "mg-gradtag mg-hidden", "data-grad-for": id, transform: `translate(${box.cx},${box.y2 + 8})`, "aria-hidden": "true" },
            record.tagRect,
            record.tagText,
          );
          record.g.append(record.tag);
        }
      }
    }

    svg.addEventListener("pointerover", (e) => this._inspect(e, "hover"));
    svg.addEventListener("pointerleave", () => this.onInspect(null, "hover"));
    svg.addEventListener("focusin", (e) => this._inspect(e, "focus"));
    svg.addEventListener("focusout", (e) => {
      // (Tab from a node into the inspector keeps the node's inspector, whose links it goes to:
      // redrawing it would remove the element the focus is moving to)
      const to = e.relatedTarget;
      if (to && (svg.contains(to) || (to.closest && to.closest(".mg-inspector")))) return;
      this.onInspect(null, "focus");
    });
    svg.addEventListener("click", (e) => this._inspect(e, "click"));
    svg.addEventListener("keydown", (e) => this._key(e));

    // Graphviz draws in the coordinates of <g id="graph0" transform="scale(..) translate(..)">.
    const g0 = svg.querySelector("g.graph");
    const transform = (g0 && g0.getAttribute("transform")) || "";
    const sc = /scale\(\s*([-\d.e]+)(?:[ ,]+([-\d.e]+))?\s*\)/.exec(transform);
    const tr = /translate\(\s*([-\d.e]+)(?:[ ,]+([-\d.e]+))?\s*\)/.exec(transform);
    const sx = sc ? +sc[1] : 1, sy = sc ? +(sc[2] ?? sc[1]) : 1;
    this.toRoot = { sx, sy, tx: tr ? sx * +tr[1] : 0, ty: tr ? sy * +(tr[2] ?? 0) : 0 };

    // Room around the drawing for the badges (top right of ops) and gradient tags (under
    // variables), which Graphviz did not know about.
    const vb = svg.viewBox && svg.viewBox.baseVal;
    if (vb && vb.width) {
      const pad = badges || gradTags ? { l: 6, t: 10, r: 12, b: 20 } : { l: 0, t: 0, r: 0, b: 0 };
      const box = [vb.x - pad.l, vb.y - pad.t, vb.width + pad.l + pad.r, vb.height + pad.t + pad.b];
      svg.setAttribute("viewBox", box.join(" "));
      this.size = { w: box[2], h: box[3] };
    } else {
      this.size = { w: parseFloat(svg.getAttribute("width")) || 400, h: parseFloat(svg.getAttribute("height")) || 300 };
    }
    // The keyboard's stops: nodes (at their centres) and open scopes' frames (at their label).
    // (only after Enter or Space opened or closed a scope: a mouse click, or a redraw the kernel
    // sent, never pulls the focus back into the picture)
    const refocus = this.keyToggled && !!this.svg && this.svg.contains(activeIn(this.el));
    this.keyToggled = false;
    const seen = this.stops || new Map();
    this.svg = svg;
    this.nodes = nodes;
    this.edges = edges;
    this.frames = frames;
    this.stops = new Map();
    this.centres = new Map();
    for (const [id, record] of nodes) {
      this.stops.set(id, record.g);
      if (record.bbox) this.centres.set(id, { x: record.bbox.cx, y: record.bbox.cy });
    }
    for (const [id, g] of frames) {
      const label = g.querySelector(":scope > text");
      const box = label ? { cx: +label.getAttribute("x"), cy: +label.getAttribute("y") } : bboxOf(g.querySelectorAll(":scope > path, :scope > polygon"));
      this.stops.set(id, g);
      if (box) this.centres.set(id, { x: box.cx, y: box.cy });
    }
    this.order = readingOrder(this.centres);
    // After a box opened or closed: the stop stays, or goes to what the click revealed.
    const kept = this.stops.has(this.active) ? this.active : this.order.find((id) => !seen.has(id) && nodes.has(id));
    this.active = null;
    this.setActive(kept ?? this.order[0] ?? null);
    if (keepScale && this.fit === "auto") {
      // (a box opened or closed: the same scale as before, so that the rest keeps its size)
      this.fit = false;
      this.applyZoom();
      this.fit = "auto";
    } else this.applyZoom(this.boxWidth);
    this.el.replaceChildren(svg);
    if (refocus && this.active) this.stops.get(this.active).focus({ preventScroll: true });
    return this;
  }

  /** Give node id the graph's Tab stop (the others keep tabindex -1). */
  setActive(id) {
    const before = this.stops.get(this.active);
    if (before && this.active !== id) before.setAttribute("tabindex", "-1");
    const g = this.stops.get(id);
    if (g) g.setAttribute("tabindex", "0");
    this.active = g ? id : null;
  }

  /** The Tab stop follows the step's node while the keyboard is elsewhere. */
  follow(id) {
    if (!this.svg || !this.nodes.has(id) || this.svg.contains(activeIn(this.el))) return;
    this.setActive(id);
  }

  focusNode(id) {
    const g = this.stops.get(id);
    if (!g) return;
    this.setActive(id);
    g.focus({ preventScroll: true });
    this.reveal(id);
  }

  /** Keys on a focused node: arrows move (nearestInDirection), Home / End go to the first /
   * last node in reading order, Enter and Space do what a click does. */
  _key(e) {
    const g = e.target && e.target.closest ? e.target.closest("g.node, g.cluster") : null;
    const id = g && g.getAttribute("id");
    if (!g || this.stops.get(id) !== g || e.altKey || e.ctrlKey || e.metaKey) return;
    let to;
    if (e.key === "Enter" || e.key === " " || e.key === "Spacebar") {
      e.preventDefault();
      this.setActive(id);
      if (id.startsWith(BOX) || this.frames.has(id)) {
        this.keyToggled = true;
        this.onToggle(id);
      }
      else this.onInspect(id, "click");
      return;
    }
    if (e.key === "Home") to = this.order[0];
    else if (e.key === "End") to = this.order[this.order.length - 1];
    else if (e.key.startsWith("Arrow")) to = nearestInDirection(this.centres, id, e.key);
    else return;
    e.preventDefault(); // (also at the edge: the view's own arrow keys do not step from a node)
    if (to) this.focusNode(to);
  }

  /** Where each node and box is in the picture's box as seen now: id -> {x, y} (its centre,
   * in pixels from the box's top left corner). */
  places() {
    const box = this.el.getBoundingClientRect();
    const out = new Map();
    const add = (id, g) => {
      const r = g.getBoundingClientRect();
      out.set(id, { x: (r.left + r.right) / 2 - box.left, y: (r.top + r.bottom) / 2 - box.top });
    };
    for (const [id, record] of this.nodes) add(id, record.g);
    for (const [id, g] of this.frames) add(id, g);
    return out;
  }

  /**
   * After a new picture: scroll so that the nodes that were nearest the clicked box or frame
   * (and are still drawn) are seen where they were before (their median shift), so that what
   * the reader was looking at stays put as far as the new layout allows. Nodes left of it come
   * first: in a left-to-right graph they feed it, and opening a box pushes what comes after it
   * to the right.
   */
  keepNear(before, clicked, near = 8) {
    const at = before && before.get(clicked);
    if (!at) return;
    const all = [...before].filter(([id]) => id !== clicked && this.nodes.has(id));
    const left = all.filter(([, p]) => p.x < at.x);
    const kept = left.length ? left : all;
    kept.sort(([, a], [, b]) => Math.hypot(a.x - at.x, a.y - at.y) - Math.hypot(b.x - at.x, b.y - at.y));
    const now = this.places();
    const shifts = kept.slice(0, near).map(([id, p]) => [now.get(id).x - p.x, now.get(id).y - p.y]);
    if (!shifts.length) return;
    const median = (values) => values.sort((a, b) => a - b)[Math.floor(values.length / 2)];
    this.el.scrollLeft += median(shifts.map((d) => d[0]));
    this.el.scrollTop += median(shifts.map((d) => d[1]));
  }

  _inspect(event, how) {
    const g = event.target && event.target.closest ? event.target.closest("g.node") : null;
    if (g && this.svg && this.svg.contains(g)) {
      const id = g.getAttribute("id");
      if (how === "click") this.setActive(id);
      if (how === "click" && id.startsWith(BOX)) this.onToggle(id);
      else this.onInspect(id, how);
      return;
    }
    if (how !== "click") return;
    const frame = event.target && event.target.closest ? event.target.closest("g.cluster") : null;
    if (frame && this.svg && this.svg.contains(frame) && (frame.getAttribute("id") || "").startsWith(FRAME)) {
      this.onToggle(frame.getAttribute("id"));
    } else this.onInspect(null, how);
  }

  /** Size the picture by zoomScale (the box's height is its CSS max-height). */
  applyZoom(width = this.boxWidth) {
    if (!this.svg || !this.size) return;
    const height = typeof getComputedStyle === "function" ? parseFloat(getComputedStyle(this.el).maxHeight) : NaN;
    const scale = zoomScale(this.fit, { width, height: Number.isFinite(height) ? height : 0 }, this.size, this.scale);
    this.scale = scale;
    this.el.dataset.labelPx = (LABEL_UNITS * scale).toFixed(1);
    this.svg.setAttribute("width", `${Math.round(this.size.w * scale)}px`);
    this.svg.setAttribute("height", `${Math.round(this.size.h * scale)}px`);
  }

  zoom(how) {
    if (how === "fit") this.fit = "fit";
    else {
      this.fit = false;
      this.scale = Math.max(0.1, Math.min(4, this.scale * (how === "in" ? 1.25 : 0.8)));
    }
    this.applyZoom(this.el.clientWidth);
  }

  /** Scroll the picture's box (only the box, never the page) so that node id is visible. */
  reveal(id) {
    const record = this.nodes.get(id);
    if (!record || !record.bbox || !this.svg || !this.size) return;
    const vb = this.svg.viewBox.baseVal;
    const t = this.toRoot || { sx: 1, sy: 1, tx: 0, ty: 0 };
    const x = (record.bbox.cx * t.sx + t.tx - vb.x) * this.scale;
    const y = (record.bbox.cy * t.sy + t.ty - vb.y) * this.scale;
    const box = this.el;
    const margin = 40;
    if (y < box.scrollTop + margin || y > box.scrollTop + box.clientHeight - margin) {
      box.scrollTop = Math.max(0, y - box.clientHeight / 2);
    }
    if (x < box.scrollLeft + margin || x > box.scrollLeft + box.clientWidth - margin) {
      box.scrollLeft = Math.max(0, x - box.clientWidth / 2);
    }
  }
}

/** Graph attributes for Graphviz by graph size (the DOT's own attributes win over these). */
export function layoutAttributes(nodeCount, { folded = false } = {}) {
  // A collapsed graph: a few boxes, but a parameter shared along a chain has an edge into each
  // (defaults: seconds for 50 boxes; these bounds and straight edges: tens of milliseconds).
  // newrank: ranks over the whole graph, so that an opened box's frame stays after what feeds
  // it (ranked cluster by cluster, a frame could land at the far left, ahead of its inputs).
  // (nslimit 5 rather than 1: enough placement passes for a chain of boxes to come out straight.)
  if (folded && nodeCount > 20) return { nslimit: "5", nslimit1: "1", mclimit: "0.1", remincross: "false", splines: "line", newrank: "true" };
  if (nodeCount <= 80) return {};
  // Network simplex (ranks, then x positions) and crossing minimisation explode on big graphs
  // with long edges (a parameter feeding ops all along a chain): a 466-node chain takes minutes
  // with Graphviz's defaults and well under a second with these bounds.
  const bounded = { nslimit: "1", nslimit1: "1", mclimit: "0.1", remincross: "false" };
  if (nodeCount > 250) bounded.splines = "line"; // spline routing is the next cost
  return bounded;
}
