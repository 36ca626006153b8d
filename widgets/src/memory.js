// The memory strip (blocks on a byte axis, one row per arena or pool) and the bytes-over-time
// timeline.
import { h, s, setText } from "./dom.js";
import { bytes } from "./format.js";

export const KINDS = ["input", "param", "activation", "node", "grad", "saved"];
const KIND_TEXT = {
  input: "input",
  param: "parameter",
  activation: "activation",
  node: "graph node",
  grad: "gradient",
  saved: "saved for backward",
};

function kindLegend() {
  return h(
    "ul",
    { class: "mg-kinds", "aria-label": "block kinds" },
    ...KINDS.map((k) => h("li", null, h("span", { class: `mg-kind-swatch mg-mem-${k}` }), h("span", { text: KIND_TEXT[k] }))),
    h("li", null, h("span", { class: "mg-kind-swatch mg-freed-swatch" }), h("span", { text: "freed / popped" })),
    h("li", null, h("span", { class: "mg-hw-swatch" }), h("span", { text: "high-water mark" })),
  );
}

const pct = (x, extent) => `${Math.max(0, Math.min(100, (100 * x) / extent)).toFixed(3)}%`;

export class MemoryStrip {
  constructor() {
    this.el = h("div", { class: "mg-memory", role: "group", "aria-label": "memory" });
    this.blockEls = new Map();
    this.shown = new Map(); // block id -> state shown
    this.rows = new Map();
    this.index = null;
  }

  build(index) {
    this.index = index;
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
      const bar = h("div", { class: "mg-bar", "data-arena": arena.id });
      const hw = h("div", { class: "mg-hw", title: "high-water mark" });
      const used = h("div", { class: "mg-used" });
      bar.append(used, hw);
      const axis = h(
        "div",
        { class: "mg-axis" },
        h("span", { text: "0" }),
        h("span", { text: bytes(Math.round(extent / 2)) }),
        h("span", { text: bytes(extent) }),
      );
      const head = h(
        "div",
        { class: "mg-arena-head" },
        h("strong", { text: arena.name }),
        h("span", { class: "mg-muted", text: ` (${arena.type}) · capacity ${bytes(arena.capacity)} · ` }),
        stats,
      );
      const row = h("div", { class: "mg-arena", "data-arena": arena.id }, head, bar, axis);
      this.rows.set(arena.id, { row, bar, hw, used, stats, extent, arena, text: "", hwAt: "", usedAt: "" });
      rows.push(row);
    }
    for (const block of index.blocks.values()) {
      const row = this.rows.get(block.arena);
      if (!row) continue;
      const el = h("div", {
        class: `mg-block mg-mem-${block.kind} mg-unalloc`,
        "data-block": block.id,
        "data-kind": block.kind,
        "data-state": "unallocated",
        title: `${block.id}: ${KIND_TEXT[block.kind] || block.kind}, ${bytes(block.nbytes)} at ${block.offset}, for ${block.owner}`,
        style: { left: pct(block.offset, row.extent), width: pct(block.nbytes, row.extent) },
      });
      row.bar.insertBefore(el, row.used);
      this.blockEls.set(block.id, el);
    }
    this.el.replaceChildren(kindLegend(), ...rows);
  }

  paint(state) {
    for (const [id, el] of this.blockEls) {
      const now = state.blocks.get(id) || "unallocated";
      if (this.shown.get(id) === now) continue;
      this.shown.set(id, now);
      el.dataset.state = now;
      el.classList.toggle("mg-unalloc", now === "unallocated");
      el.classList.toggle("mg-freed", now === "freed" || now === "popped");
    }
    for (const [id, row] of this.rows) {
      let live = 0;
      let top = 0;
      for (const block of this.index.blocks.values()) {
        if (block.arena !== id || state.blocks.get(block.id) !== "alive") continue;
        live += block.nbytes;
        top = Math.max(top, block.offset + block.nbytes);
      }
      const reported = state.arenas.get(id);
      const used = reported ? reported.used : row.arena.type === "pool" ? live : top;
      const high = reported ? reported.high_water : used;
      const text = `used ${bytes(used)} · high-water ${bytes(high)} · live blocks ${bytes(live)}`;
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

/** Bytes used per arena over the events, with high-water lines; click to pick a frame. */
export class MemoryTimeline {
  constructor({ onPick } = {}) {
    this.onPick = onPick || (() => {});
    this.el = h("div", { class: "mg-timeline" });
    this.cursor = null;
    this.index = null;
  }

  build(index) {
    this.index = index;
    const events = index.events;
    const n = Math.max(1, events.length - 1);
    const series = new Map();
    for (const arena of index.arenas.values()) series.set(arena.id, { arena, used: [], high: 0 });
    events.forEach((ev, i) => {
      const line = series.get(ev.arena);
      if (!line || typeof ev.used !== "number") return;
      line.used.push([i, ev.used]);
      line.high = Math.max(line.high, ev.high_water || 0);
    });
    const drawn = [...series.values()].filter((l) => l.used.length > 0);
    if (drawn.length === 0) {
      this.el.replaceChildren(h("div", { class: "mg-muted", text: "No allocation events were recorded, so there is no timeline." }));
      this.cursor = null;
      return;
    }
    const ymax = Math.max(1, ...drawn.map((l) => Math.max(l.high, ...l.used.map((p) => p[1]))));
    const X = (i) => ((i / n) * W).toFixed(1);
    const Y = (b) => (H - 4 - (b / ymax) * (H - 12)).toFixed(1);
    const svg = s("svg", { class: "mg-timeline-svg", viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img", "aria-label": "bytes used over time" });
    // phase boundaries
    let last = null;
    index.frames.forEach((e, k) => {
      const phase = index.framePhase[k];
      if (last !== null && phase !== last) {
        const x = X(k === 0 ? 0 : index.frames[k - 1] + 0.5);
        svg.append(s("line", { class: "mg-phase-line", x1: x, x2: x, y1: "0", y2: String(H), "vector-effect": "non-scaling-stroke" }));
      }
      last = phase;
    });
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
      const ev = ((e.clientX - rect.left) / rect.width) * n;
      let k = index.frames.findIndex((f) => f >= ev);
      if (k < 0) k = index.frames.length - 1;
      this.onPick(k);
    });
    this.el.replaceChildren(
      h("div", { class: "mg-timeline-head" }, h("span", { text: "bytes used over the recorded events (dashed: high-water); click to pick a step" })),
      svg,
      h("div", { class: "mg-axis" }, h("span", { text: "first event" }), h("span", { text: `max ${bytes(ymax)}` }), h("span", { text: `event ${events.length - 1}` })),
      h("ul", { class: "mg-kinds" }, ...legendItems),
    );
  }

  setFrame(k) {
    if (!this.cursor || !this.index) return;
    const n = Math.max(1, this.index.events.length - 1);
    const x = (((this.index.frames[k] ?? 0) / n) * W).toFixed(1);
    this.cursor.setAttribute("x1", x);
    this.cursor.setAttribute("x2", x);
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
    const X = (i) => ((i / xmax) * W).toFixed(1);
    const Y = (b) => (H - 4 - (b / ymax) * (H - 12)).toFixed(1);
    const svg = s("svg", { class: "mg-timeline-svg mg-compare-svg", viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img", "aria-label": "bytes used over time, one line per run" });
    const first = drawn[0].peak || 1;
    const items = [];
    drawn.forEach((run, i) => {
      const color = COLORS[i % COLORS.length];
      const end = Number(X(run.events || run.points[run.points.length - 1][0]));
      svg.append(...usedLines(run.points, run.peak, X, Y, end, color, { "data-run": String(i) }));
      const ratio = i === 0 ? "" : ` (${(run.peak / first).toFixed(2)}× ${drawn[0].name})`;
      items.push(
        h(
          "li",
          { "data-run": String(i), "data-peak": String(run.peak) },
          h("span", { class: "mg-line-swatch", style: { background: color } }),
          h("span", { class: "mg-run-name", text: String(run.name) }),
          h("span", { text: `: peak ${bytes(run.peak)}${ratio} · ${run.events} events` }),
        ),
      );
    });
    this.el.replaceChildren(
      h("div", { class: "mg-timeline-head" }, h("span", { text: "bytes used over the recorded events, one line per run (dashed: each run's peak)" })),
      svg,
      h("div", { class: "mg-axis" }, h("span", { text: "first event" }), h("span", { text: `max ${bytes(ymax)}` }), h("span", { text: `event ${xmax}` })),
      h("ul", { class: "mg-kinds mg-runs", "aria-label": "runs" }, ...items),
    );
  }
}
