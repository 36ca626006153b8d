// The memory strip (blocks on a byte axis, one row per arena or pool) and the bytes-over-time
// timeline.
import { h, s, setText } from "./dom.js";
import { bytes } from "../text/format.js";
import { blockName } from "./a11y.js";

export const KINDS = ["input", "param", "activation", "node", "grad", "saved"];
const KIND_TEXT = {
  input: "input",
  param: "parameter",
  activation: "activation",
  node: "graph node",
  grad: "gradient",
  saved: "saved for backward",
};
// Each kind's letter, drawn on its blocks (where they are wide enough) and its legend swatch:
// the strip reads without telling colours apart.
const KIND_LETTER = { input: "I", param: "P", activation: "A", node: "N", grad: "G", saved: "S" };
const letter = (kind) => h("span", { class: "mg-block-letter", "aria-hidden": "true", text: KIND_LETTER[kind] || "?" });
const INFO_HINT = "Point at a block, or Tab to the strip and use the arrow keys, to read what it holds.";

function kindLegend() {
  return h(
    "ul",
    { class: "mg-kinds", "aria-label": "block kinds" },
    ...KINDS.map((k) => h("li", null, h("span", { class: `mg-kind-swatch mg-mem-${k}` }, letter(k)), h("span", { text: KIND_TEXT[k] }))),
    h("li", null, h("span", { class: "mg-kind-swatch mg-freed-swatch" }), h("span", { text: "freed / popped" })),
    h("li", null, h("span", { class: "mg-hw-swatch" }), h("span", { text: "high-water mark" })),
  );
}

const pct = (x, extent) => `${Math.max(0, Math.min(100, (100 * x) / extent)).toFixed(3)}%`;
// (unclamped: a block added after the build may lie beyond the extent it was built with)
const share = (x, extent) => `${((100 * x) / extent).toFixed(3)}%`;

/** Where `value` goes in a list sorted by key: after the entries with a key <= value. */
function after(list, value, key) {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (key(list[mid]) <= value) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export class MemoryStrip {
  constructor() {
    this.el = h("div", { class: "mg-memory", role: "group", "aria-label": "memory" });
    this.blockEls = new Map();
    this.shown = new Map(); // block id -> state shown
    this.fresh = new Set(); // blocks added since the last paint (grow)
    this.rows = new Map();
    this.index = null;
    this.info = h("div", { class: "mg-block-info", text: INFO_HINT });
    this.el.addEventListener("focusin", (e) => this.describe(e.target));
    this.el.addEventListener("pointerover", (e) => this.describe(e.target));
    this.el.addEventListener("pointerleave", () => this.describe(this.focused()));
    this.el.addEventListener("keydown", (e) => this.key(e));
  }

  /** The focused element if it is in the strip (in a shadow root too), else null. */
  focused() {
    const root = this.el.getRootNode ? this.el.getRootNode() : document;
    const active = (root && root.activeElement) || document.activeElement;
    return active && this.el.contains(active) ? active : null;
  }

  /** The visible line under the strip says what the block under the pointer or focus holds. */
  describe(target) {
    const el = target && target.closest ? target.closest("[data-block]") : null;
    setText(this.info, el ? el.getAttribute("aria-label") : INFO_HINT);
  }

  /** Arrow keys move between a row's blocks (by offset), Home / End to its ends. */
  key(e) {
    const el = e.target && e.target.closest ? e.target.closest("[data-block]") : null;
    const row = el && [...this.rows.values()].find((r) => r.layer === el.parentElement);
    if (!row || e.altKey || e.ctrlKey || e.metaKey) return;
    // Live blocks by offset, then the freed ones (in a pool, many freed blocks share the offset
    // of a live one, drawn under it: they come after what is in memory now).
    const rank = (id) => this.index.blocks.get(id).offset + (this.shown.get(id) === "alive" ? 0 : 2 ** 50);
    const shown = row.order.filter((id) => this.shown.get(id) && this.shown.get(id) !== "unallocated").sort((a, b) => rank(a) - rank(b));
    const at = shown.indexOf(el.dataset.block);
    const to = { ArrowRight: at + 1, ArrowDown: at + 1, ArrowLeft: at - 1, ArrowUp: at - 1, Home: 0, End: shown.length - 1 }[e.key];
    if (to === undefined) return;
    e.preventDefault(); // (the view's own arrow keys do not step from here)
    const id = shown[Math.max(0, Math.min(shown.length - 1, to))];
    if (id === undefined) return;
    this.setActive(row, id);
    this.blockEls.get(id).focus();
  }

  /** One Tab stop per row: its active block. */
  setActive(row, id) {
    const before = this.blockEls.get(row.active);
    if (before && row.active !== id) before.setAttribute("tabindex", "-1");
    const el = this.blockEls.get(id);
    if (el) el.setAttribute("tabindex", "0");
    row.active = el ? id : null;
  }

  build(index) {
    this.index = index;
    this.painted = null; // (the next update() paints everything)
    this.fresh = new Set(); // blocks added since the last paint (grow)
    this.blockEls = new Map();
    this.shown = new Map();
    this.rows = new Map();
    if (index.arenas.size === 0 && index.blocks.size === 0) {
      this.el.replaceChildren(
        h("div", { class: "mg-memory-empty mg-muted", text: "No arena or pool was active: every array lived on numpy's heap, so there is no memory strip." }),
      );
      return;
    }
    const rows = [];
    for (const arena of index.arenas.values()) {
      const extent = Math.max(1, index.extent.get(arena.id) || arena.capacity || 1);
      const stats = h("span", { class: "mg-arena-stats" });
      const bar = h("div", { class: "mg-bar", "data-arena": arena.id, role: "group", "aria-label": `${arena.name}: blocks by offset (arrow keys move between them)` });
      // Blocks sit on the extent the strip was built with (base), in a layer scaled to the
      // extent now: an arena that grows during a live backward moves one layer, not its blocks.
      const layer = h("div", { class: "mg-bar-blocks", "data-arena": arena.id, style: { width: "100%" } });
      const hw = h("div", { class: "mg-hw", title: "high-water mark" });
      const used = h("div", { class: "mg-used" });
      bar.append(layer, used, hw);
      const half = h("span", { text: bytes(Math.round(extent / 2)) });
      const end = h("span", { text: bytes(extent) });
      const axis = h("div", { class: "mg-axis" }, h("span", { text: "0" }), half, end);
      const about = h("span", { class: "mg-muted", text: ` (${arena.type}) · capacity ${bytes(arena.capacity)} · ` });
      const head = h("div", { class: "mg-arena-head" }, h("strong", { text: arena.name }), about, stats);
      const row = h("div", { class: "mg-arena", "data-arena": arena.id }, head, bar, axis);
      this.rows.set(arena.id, { row, bar, layer, hw, used, stats, about, half, end, base: extent, extent, arena, text: "", hwAt: "", usedAt: "", order: [], active: null, live: 0 });
      rows.push(row);
    }
    for (const block of index.blocks.values()) this.addBlock(block);
    for (const row of this.rows.values()) row.order.sort((a, b) => index.blocks.get(a).offset - index.blocks.get(b).offset);
    this.el.replaceChildren(kindLegend(), ...rows, this.info);
  }

  /** A block's element, unallocated, on its row's layer (the row's order is sorted after). */
  addBlock(block) {
    const row = this.rows.get(block.arena);
    if (!row) return null;
    const el = h(
      "div",
      {
        class: `mg-block mg-mem-${block.kind} mg-unalloc`,
        "data-block": block.id,
        "data-kind": block.kind,
        "data-state": "unallocated",
        role: "img",
        "aria-roledescription": "memory block",
        tabindex: "-1",
        style: { left: share(block.offset, row.base), width: share(block.nbytes, row.base) },
      },
      letter(block.kind),
    );
    row.layer.append(el);
    row.order.push(block.id);
    this.blockEls.set(block.id, el);
    return row;
  }

  /**
   * What a live step added (extendIndex): its new blocks, placed in their rows' offset order,
   * and the extents now, without drawing the strip again. An arena new or renamed: build.
   */
  grow(index, blocks = []) {
    const known = (a) => this.rows.has(a.id) && this.rows.get(a.id).arena.name === a.name && this.rows.get(a.id).arena.type === a.type;
    if (this.rows.size === 0 || this.rows.size !== index.arenas.size || ![...index.arenas.values()].every(known)) return this.build(index);
    this.index = index;
    for (const block of blocks) {
      if (this.blockEls.has(block.id)) {
        // (sent again: placed again, in case it moved)
        const { style } = this.blockEls.get(block.id);
        const row = this.rows.get(block.arena);
        if (row) Object.assign(style, { left: share(block.offset, row.base), width: share(block.nbytes, row.base) });
      } else {
        const row = this.addBlock(block);
        if (!row) continue;
        row.order.pop();
        row.order.splice(after(row.order, block.offset, (id) => index.blocks.get(id).offset), 0, block.id);
      }
      this.fresh.add(block.id);
    }
    for (const row of this.rows.values()) {
      row.arena = index.arenas.get(row.arena.id);
      setText(row.about, ` (${row.arena.type}) · capacity ${bytes(row.arena.capacity)} · `);
      const extent = Math.max(1, index.extent.get(row.arena.id) || row.arena.capacity || 1);
      if (extent === row.extent) continue;
      row.extent = extent;
      row.layer.style.width = share(row.base, extent);
      setText(row.half, bytes(Math.round(extent / 2)));
      setText(row.end, bytes(extent));
      row.hwAt = row.usedAt = ""; // (the marks move with the extent: placed again by paintRow)
      this.fresh.add(null); // (every row's marks: paint them all next)
    }
  }

  blockText(id, now) {
    const block = this.index.blocks.get(id);
    return blockName({ kindText: KIND_TEXT[block.kind] || block.kind, owner: block.owner, size: bytes(block.nbytes), offset: bytes(block.offset), state: now });
  }

  /** Every block and row from the state alone: the reference, used for jumps. */
  paint(state) {
    for (const id of this.blockEls.keys()) this.paintBlock(id, state);
    for (const row of this.rows.values()) this.paintRow(row, state);
    this.visits = { events: 0, blocks: this.blockEls.size, rows: this.rows.size, full: true };
    this.done(state);
  }

  /** After a step forward from the state painted last: only the blocks its events allocate,
   * free or pop, and their rows (else everything, as paint). */
  update(state) {
    const was = this.painted;
    const ahead = was && was.state === state ? state.event - was.event : -1;
    if (ahead < 0 || ahead > this.blockEls.size + this.rows.size) return this.paint(state);
    const blocks = new Set(this.fresh);
    const rows = new Set(this.fresh.has(null) ? this.rows.values() : []);
    blocks.delete(null);
    for (let i = was.event + 1; i <= state.event; i++) {
      const ev = this.index.events[i];
      if (ev.type === "alloc" || ev.type === "free") blocks.add(ev.block);
      if (ev.type === "pop") for (const id of ev.blocks || []) blocks.add(id);
      if (ev.arena != null && this.rows.has(ev.arena)) rows.add(this.rows.get(ev.arena));
    }
    for (const id of blocks) {
      if (!this.blockEls.has(id)) continue;
      this.paintBlock(id, state);
      rows.add(this.rows.get(this.index.blocks.get(id).arena));
    }
    for (const row of rows) this.paintRow(row, state);
    this.visits = { events: ahead, blocks: blocks.size, rows: rows.size, full: false };
    this.done(state);
  }

  done(state) {
    this.painted = { state, event: state.event };
    this.fresh = new Set();
    const focused = this.focused();
    if (focused) this.describe(focused);
  }

  /** A block's state, class and name; its row's live bytes follow what the blocks show. */
  paintBlock(id, state) {
    const now = state.blocks.get(id) || "unallocated";
    const before = this.shown.get(id);
    if (before === now) return;
    const block = this.index.blocks.get(id);
    const row = this.rows.get(block.arena);
    row.live += (now === "alive" ? block.nbytes : 0) - (before === "alive" ? block.nbytes : 0);
    this.shown.set(id, now);
    const el = this.blockEls.get(id);
    el.dataset.state = now;
    el.classList.toggle("mg-unalloc", now === "unallocated");
    el.classList.toggle("mg-freed", now === "freed" || now === "popped");
    el.setAttribute("aria-label", this.blockText(id, now));
  }

  paintRow(row, state) {
    // The Tab stop stays on a block that is drawn (an unallocated one is not).
    const drawn = (id) => id && this.shown.get(id) && this.shown.get(id) !== "unallocated";
    const alive = (id) => this.shown.get(id) === "alive";
    if (!drawn(row.active)) this.setActive(row, row.order.find(alive) ?? row.order.find(drawn) ?? null);
    const reported = state.arenas.get(row.arena.id);
    const used = reported ? reported.used : row.arena.type === "pool" ? row.live : this.top(row);
    const high = reported ? reported.high_water : used;
    const text = `used ${bytes(used)} · high-water ${bytes(high)} · live blocks ${bytes(row.live)}`;
    if (text !== row.text) {
      row.text = text;
      setText(row.stats, text);
    }
    const hwAt = pct(high, row.extent);
    if (hwAt !== row.hwAt) {
      row.hwAt = hwAt;
      row.hw.style.left = hwAt;
    }
    const usedAt = pct(used, row.extent);
    if (usedAt !== row.usedAt) {
      row.usedAt = usedAt;
      row.used.style.width = usedAt;
    }
  }

  /** The end of the highest live block of an arena no event has reported on yet. */
  top(row) {
    let top = 0;
    for (const id of row.order) {
      const block = this.index.blocks.get(id);
      if (this.shown.get(id) === "alive") top = Math.max(top, block.offset + block.nbytes);
    }
    return top;
  }
}

const W = 1000;
const H = 140;
const COLORS = ["#2f6fde", "#d9480f", "#2b8a3e", "#9c36b5", "#c92a2a", "#1098ad"];

/** A dashed high-water line and the step line of [event, bytes] points, ending at x = end. */
function usedLines(points, high, X, Y, end, color, attrs) {
  let prev = 0;
  const pts = [`0,${Y(0)}`];
  for (const [x, used] of points) {
    pts.push(`${X(x)},${Y(prev)}`, `${X(x)},${Y(used)}`);
    prev = used;
  }
  pts.push(`${end},${Y(prev)}`);
  return [
    s("line", { class: "mg-hw-line", x1: "0", x2: String(W), y1: Y(high), y2: Y(high), stroke: color, "vector-effect": "non-scaling-stroke" }),
    s("polyline", { class: "mg-used-line", points: pts.join(" "), stroke: color, "vector-effect": "non-scaling-stroke", ...attrs }),
  ];
}

/**
 * Where each event sits on a time axis counted in steps (the slider's unit): step k covers
 * [k, k + 1), and its m events are spread evenly inside it, so a step that allocates and frees
 * still shows its peak, and no event sits on a step's edge. frames[k]: the last event of step k.
 */
export function eventSteps(frames, nEvents) {
  const x = new Array(nEvents).fill(0);
  let first = 0;
  frames.forEach((last, k) => {
    const m = last - first + 1;
    for (let i = first; i <= last && i < nEvents; i++) x[i] = k + (i - first + 1) / (m + 1);
    first = last + 1;
  });
  for (let i = first; i < nEvents; i++) x[i] = frames.length; // (events after the last step)
  return x;
}

/** The first step of each run of steps in one phase: [{step, phase}]. */
export function phaseRuns(framePhase) {
  const runs = [];
  framePhase.forEach((phase, k) => {
    if (k === 0 || phase !== framePhase[k - 1]) runs.push({ step: k, phase });
  });
  return runs;
}

/** Phase labels that would overlap the one before go one row down (measured once drawn). */
function unpile(ruler) {
  let end = -Infinity;
  for (const label of ruler.children) {
    const box = label.getBoundingClientRect();
    if (!box.width) return; // (not on screen yet)
    if (box.left < end + 4) {
      label.classList.add("mg-phase-mark-low");
      ruler.classList.add("mg-two-rows");
    } else end = box.right;
  }
}

/** Bytes used per arena over the steps, with high-water lines; click to pick a step. */
export class MemoryTimeline {
  constructor({ onPick, frameName } = {}) {
    this.onPick = onPick || (() => {});
    // (the steppers' numbering: trace/step-numbers.js; a chart built alone counts frames from 1)
    this.frameName = frameName || ((k) => `step ${k + 1}`);
    this.el = h("div", { class: "mg-timeline" });
    this.cursor = null;
    this.index = null;
  }

  build(index) {
    this.index = index;
    const events = index.events;
    const steps = index.frames.length;
    const at = eventSteps(index.frames, events.length);
    const series = new Map();
    for (const arena of index.arenas.values()) series.set(arena.id, { arena, used: [], high: 0 });
    events.forEach((ev, i) => {
      const line = series.get(ev.arena);
      if (!line || typeof ev.used !== "number") return;
      line.used.push([at[i], ev.used]);
      line.high = Math.max(line.high, ev.high_water || 0);
    });
    const drawn = [...series.values()].filter((l) => l.used.length > 0);
    if (drawn.length === 0 || steps === 0) {
      this.el.replaceChildren(h("div", { class: "mg-muted", text: "No allocation events were recorded, so there is no timeline." }));
      this.cursor = null;
      return;
    }
    const ymax = Math.max(1, ...drawn.map((l) => Math.max(l.high, ...l.used.map((p) => p[1]))));
    // (a margin after the last step: its drop, a pop, is not drawn on the last pixel)
    this.span = steps + Math.max(0.5, steps * 0.03);
    const X = (x) => ((x / this.span) * W).toFixed(1);
    const Y = (b) => (H - 4 - (b / ymax) * (H - 12)).toFixed(1);
    const share = (x) => `${((100 * x) / this.span).toFixed(3)}%`;
    const svg = s("svg", { class: "mg-timeline-svg", viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img", "aria-label": `bytes used over ${steps} steps, at most ${bytes(ymax)}` });
    // The shown step: a band over its column, and a line at its end (the state the step leaves).
    this.band = s("rect", { class: "mg-cursor-band", x: "0", y: "0", width: X(1), height: String(H) });
    svg.append(this.band);
    // Phase boundaries; the start of backward is drawn stronger and named above the chart.
    const runs = phaseRuns(index.framePhase);
    const ruler = h("div", { class: "mg-phase-ruler", "aria-hidden": "true" });
    const named = new Set();
    for (const { step, phase } of runs) {
      if (step > 0) svg.append(s("line", { class: `mg-phase-line${phase === "backward" && !named.has("backward") ? " mg-backward-start" : ""}`, x1: X(step), x2: X(step), y1: "0", y2: String(H), "vector-effect": "non-scaling-stroke" }));
      if (named.has(phase) || phase === "released") continue; // (one label per phase: no pile-up)
      named.add(phase);
      const text = step === 0 ? phase : `${phase} from ${this.frameName(step)}`;
      ruler.append(h("span", { class: `mg-phase-mark mg-phase-mark-${phase}`, "data-step": String(step), style: { left: share(step) }, text }));
    }
    const legendItems = [];
    drawn.forEach((line, i) => {
      const color = COLORS[i % COLORS.length];
      svg.append(...usedLines(line.used, line.high, X, Y, W, color, { "data-arena": line.arena.id }));
      legendItems.push(
        h("li", null, h("span", { class: "mg-line-swatch", style: { background: color } }), h("span", { text: `${line.arena.name}: peak ${bytes(line.high)}` })),
      );
    });
    this.cursor = s("line", { class: "mg-cursor", x1: "0", x2: "0", y1: "0", y2: String(H), "vector-effect": "non-scaling-stroke" });
    svg.append(this.cursor);
    svg.addEventListener("click", (e) => {
      const rect = svg.getBoundingClientRect();
      if (!rect.width) return;
      const x = ((e.clientX - rect.left) / rect.width) * this.span;
      this.onPick(Math.max(0, Math.min(steps - 1, Math.floor(x))));
    });
    // The y axis' top value, at its height on the left (not under the x axis).
    const yTop = h("span", { class: "mg-ymax", style: { top: `${((100 * Number(Y(ymax))) / H).toFixed(2)}%` }, text: `max ${bytes(ymax)}` });
    const plot = h("div", { class: "mg-plot" }, svg, yTop);
    if (typeof requestAnimationFrame === "function") requestAnimationFrame(() => unpile(ruler));
    this.el.replaceChildren(
      h("div", { class: "mg-timeline-head" }, h("span", { text: "bytes used over the steps (dashed: high-water); click to pick a step" })),
      ruler,
      plot,
      h(
        "div",
        { class: "mg-xaxis" },
        h("span", { style: { left: "0" }, text: this.frameName(0) }),
        steps > 1 ? h("span", { style: { right: `${(100 - (100 * steps) / this.span).toFixed(3)}%` }, text: this.frameName(steps - 1) }) : null,
      ),
      h("ul", { class: "mg-kinds" }, ...legendItems),
    );
  }

  setFrame(k) {
    if (!this.cursor || !this.index) return;
    const x = (((Math.max(0, k) + 1) / this.span) * W).toFixed(1);
    this.cursor.setAttribute("x1", x);
    this.cursor.setAttribute("x2", x);
    this.band.setAttribute("x", ((Math.max(0, k) / this.span) * W).toFixed(1));
  }
}

/**
 * Two or more runs on one bytes-over-time axis (MemoryView.compare): one step line per run,
 * its peak dashed, and a legend with each peak as a ratio to the first run's.
 * runs: [{name, points: [[event, bytes], ...], events, peak}] (built in Python from traces).
 */
export class MemoryCompare {
  constructor() {
    this.el = h("div", { class: "mg-timeline mg-compare" });
  }

  build(runs) {
    const drawn = runs.filter((r) => Array.isArray(r.points) && r.points.length > 0);
    if (drawn.length === 0) {
      this.el.replaceChildren(h("div", { class: "mg-muted", text: "None of these runs recorded an allocation, so there is nothing to compare." }));
      return;
    }
    const xmax = Math.max(1, ...drawn.map((r) => r.events || r.points[r.points.length - 1][0]));
    const ymax = Math.max(1, ...drawn.map((r) => r.peak || 0));
    const span = xmax * 1.03 + 1; // (a margin: the last drop, a pop, is not on the last pixel)
    const X = (i) => ((i / span) * W).toFixed(1);
    const Y = (b) => (H - 4 - (b / ymax) * (H - 12)).toFixed(1);
    const svg = s("svg", { class: "mg-timeline-svg mg-compare-svg", viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img", "aria-label": "bytes used over time, one line per run" });
    const first = drawn[0].peak || 1;
    const items = [];
    drawn.forEach((run, i) => {
      const color = COLORS[i % COLORS.length];
      const end = Number(X(run.events || run.points[run.points.length - 1][0]));
      svg.append(...usedLines(run.points, run.peak, X, Y, end, color, { "data-run": String(i) }));
      // Where this run's backward begins: a dashed mark in its colour (and said in the legend).
      const back = typeof run.backward_at === "number" ? run.backward_at : null;
      if (back !== null) svg.append(s("line", { class: "mg-phase-line mg-backward-start", "data-run": String(i), x1: X(back), x2: X(back), y1: "0", y2: String(H), style: { stroke: color }, "vector-effect": "non-scaling-stroke" }));
      const ratio = i === 0 ? "" : ` (${(run.peak / first).toFixed(2)}× ${drawn[0].name})`;
      items.push(
        h(
          "li",
          { "data-run": String(i), "data-peak": String(run.peak) },
          h("span", { class: "mg-line-swatch", style: { background: color } }),
          h("span", { class: "mg-run-name", text: String(run.name) }),
          h("span", { text: `: peak ${bytes(run.peak)}${ratio} · ${run.events} events${typeof run.backward_at === "number" ? `, backward from event ${run.backward_at} (dashed mark)` : ""}` }),
        ),
      );
    });
    this.el.replaceChildren(
      h("div", { class: "mg-timeline-head" }, h("span", { text: "bytes used over the recorded events, one line per run (dashed: each run's peak)" })),
      h("div", { class: "mg-plot" }, svg, h("span", { class: "mg-ymax", style: { top: `${((100 * Number(Y(ymax))) / H).toFixed(2)}%` }, text: `max ${bytes(ymax)}` })),
      h("div", { class: "mg-xaxis" }, h("span", { style: { left: "0" }, text: "event 0" }), h("span", { style: { right: `${(100 - (100 * xmax) / span).toFixed(3)}%` }, text: `event ${xmax}` })),
      h("ul", { class: "mg-kinds mg-runs", "aria-label": "runs" }, ...items),
    );
  }
}
