// Restyling per step (src/ui/paint.js, the memory strip of src/ui/memory-charts.js): a step
// forward restyles only what its events changed (update), a jump everything (paint). Here both
// run side by side on every step of real traces (test/fixtures/, tests/trace_golden/) and must
// leave the same picture, classes, badges, tags and accessible names; and on a generated chain
// of 2,000 ops the work of one step (items looked at, DOM writes) is counted, not timed.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { indexTrace, extendIndex, stateAt, Replayer, frameEvents } from "../src/trace/replay.js";
import { BOX, boxProgress, indexFolding } from "../src/trace/scope-boxes.js";
import { StepPainter } from "../src/ui/paint.js";
import { MemoryStrip } from "../src/ui/memory-charts.js";
import { describeNode } from "../src/ui/graph-canvas.js";
import { FakeElement, installFakeDocument, looks, writes } from "./support-dom.js";
import { liveMessages } from "./support-live.js";

installFakeDocument();

const fixtures = fileURLToPath(new URL("./fixtures/", import.meta.url));
const golden = fileURLToPath(new URL("../../tests/trace_golden/", import.meta.url));
const json = (path) => JSON.parse(readFileSync(path, "utf8"));

/** Every real trace: the JS fixtures and the pinned Python scenarios (some files hold several). */
function realTraces() {
  const found = [];
  for (const f of readdirSync(fixtures).filter((f) => f.endsWith(".json"))) found.push([f, json(fixtures + f)]);
  for (const f of readdirSync(golden).filter((f) => f.endsWith(".json"))) {
    json(golden + f).forEach((t, i) => found.push([`${f}[${i}]`, t]));
  }
  return found.filter(([, t]) => t.nodes.length > 0 && t.frames.length > 0);
}

/**
 * Closed boxes as minigrad/widgets/collapse.py `boxes` makes them: group(node, k) names the box
 * a node is drawn in (null: drawn as itself); a box's border ops are those whose output feeds a
 * node outside it.
 */
function foldBy(trace, group) {
  const nodes = new Map(trace.nodes.map((n) => [n.id, n]));
  const where = new Map();
  const boxes = {};
  trace.nodes.forEach((node, k) => {
    const scope = group(node, k);
    const id = scope === null ? node.id : BOX + scope;
    where.set(node.id, id);
    if (scope === null) return;
    const box = (boxes[id] ||= { scope, members: [], ops: 0, border: [], kind: null, alike: 1 });
    box.members.push(node.id);
    box.ops += node.type === "op" ? 1 : 0;
  });
  for (const e of trace.edges) {
    const from = where.get(e.source);
    if (e.kind === "parent" && from !== where.get(e.target) && boxes[from] && nodes.get(e.source).op != null) {
      const border = boxes[from].border;
      if (!border.includes(nodes.get(e.source).op)) border.push(nodes.get(e.source).op);
    }
  }
  return indexFolding({ boxes, frames: [], visible: new Set(where.values()).size });
}

/** Boxes for a trace: its top-level scopes where it has them, else every other run of 6 nodes. */
function someBoxes(trace) {
  if (trace.nodes.some((n) => Array.isArray(n.scope) && n.scope.length)) return foldBy(trace, (n) => (n.scope && n.scope.length ? String(n.scope[0]) : null));
  return foldBy(trace, (n, k) => (Math.floor(k / 6) % 2 === 0 ? `g${Math.floor(k / 6)}` : null));
}

/** What GraphCanvas.mount makes for the stepper (badges on ops and boxes, tags on variables and
 * boxes), with fake elements: the nodes not in a box, the boxes, and the edges between them. */
function fakeCanvas(index, fold) {
  const nodes = new Map();
  const record = (id, base, { badge, tag }) => {
    const r = { g: new FakeElement("g"), base, name: base };
    r.g.setAttribute("aria-label", base);
    if (badge) {
      r.badgeText = new FakeElement("text");
      r.badge = new FakeElement("g");
      r.badge.classList.add("mg-hidden");
    }
    if (tag) {
      r.tagText = new FakeElement("text");
      r.tagRect = new FakeElement("rect");
      r.tag = new FakeElement("g");
      r.tag.classList.add("mg-hidden");
    }
    nodes.set(id, r);
    return r;
  };
  for (const [id, node] of index.nodes) {
    if (!fold.boxOf.has(id)) record(id, describeNode(node), { badge: node.type === "op", tag: node.type === "variable" });
  }
  for (const [id, box] of fold.boxes) record(id, `scope ${box.scope}: click to open it`, { badge: true, tag: true }).scope = box.scope;
  const edges = [];
  index.edges.forEach((e, k) => {
    if (!fold.boxOf.has(e.source) && !fold.boxOf.has(e.target)) edges[k] = new FakeElement("g");
  });
  return { nodes, edges, followed: null, follow(id) {
    this.followed = id;
  } };
}

/** The whole picture as plain data. */
function picture(canvas) {
  const nodes = {};
  for (const [id, r] of canvas.nodes) {
    nodes[id] = { g: looks(r.g), badge: looks(r.badge), badgeText: looks(r.badgeText), tag: looks(r.tag), tagText: looks(r.tagText), tagRect: looks(r.tagRect) };
  }
  return { nodes, edges: canvas.edges.map((g) => looks(g)), followed: canvas.followed };
}

const touchedBy = (index, k) => {
  const set = new Set();
  for (const ev of frameEvents(index, k)) if (ev.type === "accumulate" || ev.type === "start") set.add(ev.variable);
  return set;
};

/** Every frame forward, then jumps back and forward, then forward again from the middle. */
function walk(n) {
  const path = [...Array(n).keys()];
  const mid = Math.floor(n / 2);
  path.push(mid, 0, Math.min(n - 1, 3), n - 1);
  for (let k = mid; k < n; k++) path.push(k);
  return path;
}

for (const folded of [false, true]) {
  test(`a step's update leaves the same picture as a full paint, every step of every real trace${folded ? ", with closed boxes" : ""}`, () => {
    let stepped = 0;
    let boxesChecked = 0;
    for (const [name, trace] of realTraces()) {
      const index = indexTrace(trace);
      const fold = folded ? someBoxes(trace) : indexFolding(null);
      if (folded && fold.boxes.size === 0) continue;
      const a = new StepPainter(fakeCanvas(index, fold), index, fold);
      const b = new StepPainter(fakeCanvas(index, fold), index, fold);
      const replayer = new Replayer(index);
      for (const k of walk(index.frames.length)) {
        const touched = touchedBy(index, k);
        const state = replayer.seek(k);
        a.update(state, touched);
        b.paint(stateAt(index, k), touched);
        if (!a.visits.full) stepped++;
        assert.deepEqual(picture(a.canvas), picture(b.canvas), `${name}${folded ? " (boxes)" : ""}: the pictures differ at frame ${k}`);
        for (const [id, box] of fold.boxes) {
          assert.deepEqual(a.tally.progress(id, state), boxProgress(box, state, index), `${name}: box ${id} at frame ${k}`);
          boxesChecked++;
        }
      }
    }
    assert.ok(stepped > 300, `only ${stepped} steps went through update's own path`);
    if (folded) assert.ok(boxesChecked > 100, `only ${boxesChecked} box progresses compared`);
  });
}

test("the accessible names are the full paint's, word for word (a box's, a summed gradient's)", () => {
  const trace = json(fixtures + "diamond.json");
  const index = indexTrace(trace);
  const fold = indexFolding(null);
  const canvas = fakeCanvas(index, fold);
  const painter = new StepPainter(canvas, index, fold);
  const replayer = new Replayer(index);
  for (let k = 0; k < index.frames.length; k++) painter.update(replayer.seek(k), touchedBy(index, k));
  // (diamond: a and b are parameters summed into twice; the last frame releases the graph)
  assert.match(canvas.nodes.get("v0").g.getAttribute("aria-label"), /^parameter a, gradient (assigned \(=\)|summed \(\+=\)) /);
  assert.equal(canvas.nodes.get("f8").g.getAttribute("aria-label"), "op sum, backward done, 0 pending gradients");
});

function stripLooks(strip) {
  const blocks = {};
  for (const [id, el] of strip.blockEls) blocks[id] = looks(el);
  const rows = {};
  for (const [id, row] of strip.rows) rows[id] = { stats: row.stats.textContent, hw: looks(row.hw), used: looks(row.used), active: row.active };
  return { blocks, rows };
}

test("the memory strip's update leaves the same blocks and rows as a full paint, every step", () => {
  let stepped = 0;
  for (const [name, trace] of realTraces()) {
    const index = indexTrace(trace);
    if (index.blocks.size === 0) continue;
    const a = new MemoryStrip();
    const b = new MemoryStrip();
    a.build(index);
    b.build(index);
    const replayer = new Replayer(index);
    for (const k of walk(index.frames.length)) {
      a.update(replayer.seek(k));
      b.paint(stateAt(index, k));
      if (!a.visits.full) stepped++;
      assert.deepEqual(stripLooks(a), stripLooks(b), `${name}: the memory strips differ at frame ${k}`);
    }
  }
  assert.ok(stepped > 50, `only ${stepped} steps went through update's own path`);
});

/** A strip as it looks on the page: each block's place on the bar (its layer scaled), state and
 * name, and each row's texts and marks. */
function stripSeen(strip) {
  const blocks = {};
  const places = {};
  for (const [id, el] of strip.blockEls) {
    const layer = parseFloat(el.parentElement.style.width) / 100;
    const { attrs, classes, data } = looks(el);
    blocks[id] = { attrs, classes, data };
    places[id] = [parseFloat(el.style.left) * layer, parseFloat(el.style.width) * layer];
  }
  const rows = {};
  for (const [id, row] of strip.rows) {
    rows[id] = { stats: row.stats.textContent, about: row.about.textContent, axis: [row.half.textContent, row.end.textContent], hw: row.hw.style.left, used: row.used.style.width, order: row.order, active: row.active };
  }
  return { blocks, rows, places };
}

test("the memory strip of a live stepper grows by each step's new blocks, and looks as one built from the whole trace", () => {
  let grown = 0;
  for (const [name, trace] of realTraces()) {
    if (!trace.blocks || trace.blocks.length === 0 || trace.frames.length < 4) continue;
    const cut = Math.min(trace.initial_frame ?? 0, Math.floor(trace.frames.length / 2));
    const { prefix, messages } = liveMessages(trace, cut);
    const live = prefix(cut);
    const index = indexTrace(live);
    const replayer = new Replayer(index);
    const strip = new MemoryStrip();
    strip.build(index);
    strip.update(replayer.seek(cut));
    messages.forEach((m, i) => {
      // (as BackwardStepper.message does with an "append")
      live.events.push(...m.events);
      live.frames.push(...m.frames);
      live.blocks.push(...m.blocks);
      const { preexistingChanged, stripChanged } = extendIndex(index, m);
      replayer.extend(index, { preexistingChanged });
      const rows = strip.rows;
      if (stripChanged) strip.grow(index, m.blocks);
      if (strip.rows === rows && m.blocks.length) grown++;
      const k = cut + 1 + i;
      strip.update(replayer.seek(k));
      const whole = new MemoryStrip();
      whole.build(indexTrace(prefix(k)));
      whole.paint(stateAt(prefix(k), k));
      const [a, b] = [stripSeen(strip), stripSeen(whole)];
      for (const [id, [left, width]] of Object.entries(b.places)) {
        // (percentages written with 3 decimals, on another extent: equal within 0.01 %)
        assert.ok(Math.abs(a.places[id][0] - left) < 0.01 && Math.abs(a.places[id][1] - width) < 0.01, `${name}: block ${id} at ${a.places[id]}, not ${[left, width]}`);
      }
      delete a.places;
      delete b.places;
      assert.deepEqual(a, b, `${name}: the strips differ after live step ${k}`);
    });
  }
  assert.ok(grown > 10, `only ${grown} steps grew the strip in place`);
});

/**
 * A chain of n ops, h_k = mul(h_{k-1}, W), all sharing one weight W (its edges grow with n),
 * each output a block of one pool, forward then backward, as minigrad.record() writes it: one
 * frame per leaf and op, one per backward node, then done and consume.
 */
export function chainTrace(n) {
  const nodes = [
    { id: "x", type: "variable", label: "x", role: "data", size: 2, op: null, pending_count: 0 },
    { id: "W", type: "variable", label: "W", role: "param", size: 2, op: null, pending_count: 0 },
  ];
  const edges = [];
  const events = [];
  const frames = [];
  const blocks = [];
  const h = (k) => (k === 0 ? "x" : `h${k}`);
  const frame = () => frames.push(events.length - 1);
  events.push({ type: "leaf", phase: "forward", node: "x" });
  frame();
  events.push({ type: "leaf", phase: "forward", node: "W" });
  frame();
  for (let k = 1; k <= n; k++) {
    nodes.push({ id: `f${k}`, type: "op", label: "mul", size: 2, pending_count: k < n ? 1 : 0 });
    nodes.push({ id: h(k), type: "variable", label: "mul", role: k === n ? "output" : "intermediate", size: 2, op: `f${k}`, pending_count: 0 });
    edges.push(
      { kind: "parent", source: h(k - 1), target: `f${k}`, slot: 0 },
      { kind: "parent", source: "W", target: `f${k}`, slot: 1 },
      { kind: "output", source: `f${k}`, target: h(k), slot: 0 },
      { kind: "saved", source: h(k - 1), target: `f${k}`, slot: 0 },
      { kind: "saved", source: "W", target: `f${k}`, slot: 1 },
    );
    blocks.push({ id: `m${k}`, arena: "a0", offset: 16 * (k - 1), nbytes: 16, kind: "activation", owner: h(k) });
    events.push({ type: "op", phase: "forward", node: `f${k}`, output: h(k), pending: k > 1 ? [{ node: `f${k - 1}`, count: 1 }] : [] });
    events.push({ type: "alloc", phase: "forward", block: `m${k}`, arena: "a0", used: 16 * k, high_water: 16 * k });
    frame();
  }
  events.push({ type: "start", phase: "backward", node: `f${n}`, variable: h(n), grad: [1] });
  frame();
  for (let k = n; k >= 1; k--) {
    events.push({ type: "apply", phase: "backward", node: `f${k}`, grad: [1, 1] });
    if (k > 1) events.push({ type: "accumulate", phase: "backward", node: `f${k}`, variable: h(k - 1), first_write: true, grad: [k, k] });
    events.push({ type: "accumulate", phase: "backward", node: `f${k}`, variable: "W", first_write: k === n, grad: [n - k + 1, 1] });
    events.push({ type: "free", phase: "backward", block: `m${k}`, arena: "a0", used: 16 * (k - 1), high_water: 16 * n });
    if (k > 1) events.push({ type: "pending", phase: "backward", node: `f${k - 1}`, count: 0 }, { type: "ready", phase: "backward", node: `f${k - 1}` });
    frame();
  }
  events.push({ type: "done", phase: "backward" });
  frame();
  events.push({ type: "consume", phase: "release" });
  frame();
  return { schema: "minigrad-trace", version: 1, title: `chain ${n}`, nodes, edges, arenas: [{ id: "a0", name: "pool", type: "pool", capacity: 16 * n }], blocks, events, frames, initial_frame: 0 };
}

/** The first half of the chain closed in one box, the rest in boxes of 50 ops (and outputs). */
const chainBoxes = (trace, n) => foldBy(trace, (node, k) => (k < 2 ? null : Math.floor((k - 2) / 2) < n / 2 ? "big" : `layer${Math.floor((k - 2) / 100)}`));

/** Step through the whole chain with update(); the most work one step forward did. */
function stepWork(n) {
  const trace = chainTrace(n);
  const index = indexTrace(trace);
  const most = {};
  let full = 0;
  let total = 0;
  for (const fold of [indexFolding(null), chainBoxes(trace, n)]) {
    const painter = new StepPainter(fakeCanvas(index, fold), index, fold);
    const strip = new MemoryStrip();
    strip.build(index);
    const replayer = new Replayer(index);
    for (let k = 0; k < index.frames.length; k++) {
      const state = replayer.seek(k);
      const before = writes.n;
      painter.update(state, touchedBy(index, k));
      strip.update(state);
      const v = painter.visits;
      if (v.full) {
        full++;
        continue;
      }
      assert.equal(strip.visits.full, false, `the strip painted everything at frame ${k}`);
      const work = { visited: v.nodes + v.boxes + v.edges + strip.visits.blocks + strip.visits.rows, writes: writes.n - before };
      total += work.visited;
      for (const key of Object.keys(work)) most[key] = Math.max(most[key] || 0, work[key]);
    }
  }
  return { most, full, total, steps: 2 * index.frames.length };
}

test("a step forward visits and writes a bounded number of items, whatever the graph's size (chain of 2,000 ops)", () => {
  const small = stepWork(200);
  const big = stepWork(2000);
  // Full paints: the first one, and the steps that change what every node or saved edge shows
  // (backward starts, backward done, graph consumed): 4 per walk, with and without boxes.
  assert.equal(small.full, 8);
  assert.equal(big.full, 8);
  // One step: its op, the op before, their outputs and W, their edges, their boxes, one block.
  assert.ok(big.most.visited <= 24, `a step visited ${big.most.visited} items`);
  assert.ok(big.most.writes <= 40, `a step wrote ${big.most.writes} times to the DOM`);
  assert.deepEqual(big.most, small.most, "the work of one step grew with the graph");
  // The whole walk: about ten times as much for ten times the ops (a full paint each step: n²).
  assert.ok(big.total / small.total < 10.5, `the walk's work grew ${(big.total / small.total).toFixed(2)}x for 10x the ops`);
  console.log(`paint per step, chain of 2,000 ops: at most ${big.most.visited} items visited and ${big.most.writes} DOM writes (full paint: ${indexTrace(chainTrace(2000)).nodes.size} nodes + ${5 * 2000} edges)`);
});
