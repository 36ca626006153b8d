// The frame fold (src/trace/replay.js) on the sample traces in test/fixtures/ (made by minigrad.record()
// and minigrad.trace_of()).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import {
  indexTrace,
  extendIndex,
  stateAt,
  snapshot,
  Replayer,
  frameEvents,
  phaseEndAfter,
  clampFrame,
  eventNodes,
  initialState,
  applyEvent,
} from "../src/trace/replay.js";
import { liveMessages } from "./support-live.js";

const here = fileURLToPath(new URL("./fixtures/", import.meta.url));
const load = (name) => JSON.parse(readFileSync(here + name + ".json", "utf8"));
const FIXTURES = readdirSync(here)
  .filter((f) => f.endsWith(".json"))
  .map((f) => f.slice(0, -5));

test("fixtures are version-1 traces", () => {
  assert.ok(FIXTURES.length >= 5);
  for (const name of FIXTURES) {
    const t = load(name);
    assert.equal(t.schema, "minigrad-trace");
    assert.equal(t.version, 1);
  }
});

test("diamond: forward builds nodes and pending counts, no gradients", () => {
  const t = load("diamond");
  const s0 = stateAt(t, 0);
  assert.deepEqual([...s0.exists], ["v0"]);
  assert.equal(s0.phase, "forward");
  assert.equal(s0.current, "v0");

  const s = stateAt(t, t.initial_frame);
  assert.equal(s.phase, "forward");
  assert.equal(s.exists.size, t.nodes.length);
  assert.deepEqual(Object.fromEntries(s.pending), { f2: 2, f4: 1, f6: 1, f8: 0 });
  assert.equal(s.grads.size, 0, "no gradient may show before backward has run");
  assert.equal(s.applied.size, 0);
  assert.equal(s.current, "f8");
});

test("diamond: backward seeds, applies, sums, counts down", () => {
  const t = load("diamond");
  const start = stateAt(t, 6);
  assert.equal(start.phase, "backward");
  assert.deepEqual(start.grads.get("v9"), { values: [1], first: true, writes: 1, seed: true, by: "f8" });
  assert.deepEqual(start.ready, ["f8"]);
  assert.equal(start.current, "v9");

  const s7 = stateAt(t, 7);
  assert.deepEqual([...s7.applied], ["f8"]);
  assert.equal(s7.current, "f8");
  assert.equal(s7.grads.get("v7").first, true);
  assert.equal(s7.pending.get("f6"), 0);
  assert.deepEqual(s7.ready, ["f6"]);
  assert.deepEqual(
    frameEvents(indexTrace(t), 7).map((e) => e.type),
    ["apply", "accumulate", "pending", "ready"],
  );

  // add(x, x): the second write into mul's output is a sum.
  const s9 = stateAt(t, 9);
  assert.equal(s9.current, "f4");
  const g = s9.grads.get("v3");
  assert.equal(g.first, false);
  assert.equal(g.writes, 2);
  assert.deepEqual(g.values, [0.8399486832280523, 0.002681901366051731]);
  assert.equal(s9.pending.get("f2"), 0);
  assert.deepEqual(s9.ready, ["f2"]);

  const end = stateAt(t, t.frames.length - 1);
  assert.equal(end.phase, "released");
  assert.ok(end.done && end.consumed);
  assert.equal(end.current, null);
  assert.equal(end.applied.size, 4);
  assert.deepEqual(end.ready, []);
  assert.equal(end.grads.get("v0").first, true);
  assert.equal(end.grads.get("v1").first, true);
});

test("pool_step: blocks from before the recording, early frees, the pop", () => {
  const t = load("pool_step");
  const index = indexTrace(t);
  assert.deepEqual(index.preexisting.sort(), ["b17", "b19", "b5", "b7"]);
  const s0 = stateAt(index, 0);
  for (const id of ["b5", "b7", "b17", "b19"]) assert.equal(s0.blocks.get(id), "alive");
  assert.equal(s0.blocks.get("b0"), "alive");
  assert.equal(s0.blocks.has("b2"), false, "not allocated yet");

  // frame 6 holds cross_entropy's apply, with the free of its saved block
  const s6 = stateAt(index, 6);
  assert.equal(s6.current, "f26");
  assert.equal(s6.blocks.get("b22"), "freed");
  assert.equal(s6.blocks.get("b28"), "alive");

  const end = stateAt(index, index.frames.length - 1);
  for (const b of t.blocks) {
    const want = b.arena === "a0" ? "popped" : "alive";
    assert.equal(end.blocks.get(b.id), want, b.id);
  }
  assert.deepEqual(end.arenas.get("a0"), { used: 0, high_water: 7616 });
  // layer0.weight already had a gradient: its only write is a sum, not a first write
  assert.equal(end.grads.get("v4").first, false);
  assert.equal(end.grads.get("v4").writes, 1);
});

test("chain200 (trace_of: forward only)", () => {
  const t = load("chain200");
  const index = indexTrace(t);
  assert.ok(index.framePhase.every((p) => p === "forward"));
  assert.equal(phaseEndAfter(index, 0), t.frames.length - 1);
  const s = stateAt(index, t.initial_frame);
  assert.equal(s.exists.size, t.nodes.length);
  for (const id of index.opIds) assert.equal(s.pending.get(id), index.nodes.get(id).pending_count, id);
});

test("phaseEndAfter: forward jumps to the end of the phase, then of the next", () => {
  const index = indexTrace(load("diamond"));
  assert.equal(phaseEndAfter(index, 0), 5);
  assert.equal(phaseEndAfter(index, 3), 5);
  assert.equal(phaseEndAfter(index, 5), 10);
  assert.equal(phaseEndAfter(index, 6), 10);
  assert.equal(phaseEndAfter(index, 10), 11);
  assert.equal(phaseEndAfter(index, 11), 11);
  assert.equal(clampFrame(index, 99), 11);
  assert.equal(clampFrame(index, -4), 0);
});

for (const name of FIXTURES) {
  test(`${name}: invariants at every frame`, () => {
    const t = load(name);
    const index = indexTrace(t);
    const opIds = new Set(index.opIds);
    for (let k = 0; k < t.frames.length; k++) {
      const s = stateAt(index, k);
      assert.equal(s.frame, k);
      assert.equal(s.event, t.frames[k]);
      for (const [id, count] of s.pending) {
        assert.ok(opIds.has(id), `${id} is an op`);
        assert.ok(count >= 0, `${name} frame ${k}: ${id} pending ${count}`);
      }
      if (!s.backwardStarted) assert.equal(s.grads.size, 0, `${name} frame ${k}: gradients before backward`);
      for (const id of s.ready) assert.ok(!s.applied.has(id), `${id} ready and applied`);
      if (s.current) assert.ok(index.nodes.has(s.current), s.current);
      if (k === t.initial_frame) {
        assert.equal(s.phase, "forward");
        for (const id of index.opIds) {
          if (s.exists.has(id)) assert.equal(s.pending.get(id), index.nodes.get(id).pending_count, `${name}: ${id}`);
        }
      }
    }
  });

  test(`${name}: stateAt is pure and the Replayer agrees with it`, () => {
    const t = load(name);
    const before = JSON.stringify(t);
    const index = indexTrace(t);
    const n = t.frames.length;
    const expected = [];
    for (let k = 0; k < n; k++) expected.push(snapshot(stateAt(index, k)));
    assert.deepEqual(snapshot(stateAt(t, n - 1)), expected[n - 1], "same input, same state");
    assert.equal(JSON.stringify(t), before, "the trace is not modified");

    const r = new Replayer(index);
    for (let k = 0; k < n; k++) assert.deepEqual(snapshot(r.seek(k)), expected[k], `forward ${k}`);
    for (let k = n - 1; k >= 0; k--) assert.deepEqual(snapshot(r.seek(k)), expected[k], `back ${k}`);
    let seed = 12345;
    const rand = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    for (let i = 0; i < 60; i++) {
      const k = Math.floor(rand() * n);
      assert.deepEqual(snapshot(r.seek(k)), expected[k], `random seek ${k}`);
    }
  });
}

test("Replayer.extend: appended events continue the same state", () => {
  const full = load("diamond");
  const cut = 7;
  const partial = { ...full, events: full.events.slice(0, full.frames[cut] + 1), frames: full.frames.slice(0, cut + 1) };
  const r = new Replayer(indexTrace(partial));
  r.seek(cut);
  r.extend(indexTrace(full));
  for (let k = cut; k < full.frames.length; k++) {
    assert.deepEqual(snapshot(r.seek(k)), snapshot(stateAt(full, k)));
  }
});

test("checkpoint: a recompute phase inside backward, then backward again, then released", () => {
  const t = load("checkpoint");
  const index = indexTrace(t);
  const runs = index.framePhase.filter((p, k) => k === 0 || p !== index.framePhase[k - 1]);
  assert.deepEqual(runs, ["forward", "backward", "recompute", "backward", "released"]);
  const k = index.framePhase.indexOf("recompute");
  assert.equal(stateAt(t, k).phase, "recompute");
  assert.ok(frameEvents(index, k).some((ev) => ev.type === "op" && ev.text.startsWith("recompute: ")));
  // stepping forward with the Replayer and folding from scratch agree on every frame
  const r = new Replayer(index);
  for (let f = 0; f < t.frames.length; f++) assert.deepEqual(snapshot(r.seek(f)), snapshot(stateAt(t, f)));
  const end = stateAt(t, t.frames.length - 1);
  assert.equal(end.done, true);
});

const indexView = (index) => ({
  blocks: [...index.blocks.keys()].sort(),
  preexisting: [...index.preexisting],
  extent: [...index.extent.entries()].sort(),
  arenas: [...index.arenas.keys()],
  framePhase: [...index.framePhase],
  events: index.events.length,
  frames: index.frames.length,
});

for (const name of ["chain200", "mlp_step", "pool_step", "checkpoint"]) {
  test(`${name}: a live step's index work is what its message adds, and the index is the same`, () => {
    const t = load(name);
    const cut = Math.min(t.initial_frame ?? 0, Math.floor(t.frames.length / 2)); // (chain200 is forward only)
    const { prefix, messages } = liveMessages(t, cut);
    assert.ok(messages.length > 3, `${name}: steps to append`);
    const live = prefix(cut);
    const index = indexTrace(live);
    const r = new Replayer(index);
    r.seek(cut);
    const work = [];
    messages.forEach((m, i) => {
      live.events.push(...m.events); // (as the view appends to its trace, which the index shares)
      live.frames.push(...m.frames);
      live.blocks.push(...m.blocks);
      const { entries } = extendIndex(index, m);
      work.push(entries);
      assert.equal(entries, m.events.length + m.frames.length + m.blocks.length + m.arenas.length, `${name}: message ${i}`);
      const k = cut + 1 + i;
      assert.deepEqual(indexView(index), indexView(indexTrace(prefix(k))), `${name}: index after step ${k}`);
      assert.deepEqual(snapshot(r.seek(k)), snapshot(stateAt(prefix(k), k)), `${name}: state after step ${k}`);
    });
    // Rebuilding the index each message would touch every event so far: the last message
    // would cost more than the first by the length of the trace in between.
    const total = work.reduce((a, b) => a + b, 0);
    const sizes = messages.map((m) => m.events.length + m.frames.length + m.blocks.length + m.arenas.length);
    assert.equal(total, sizes.reduce((a, b) => a + b, 0));
    assert.ok(work[work.length - 1] < t.events.length / 4, `${name}: ${work[work.length - 1]} entries for the last step`);
  });
}

test("eventNodes names every node whose own state an event changes (what a step restyles)", () => {
  const golden = fileURLToPath(new URL("../../tests/trace_golden/", import.meta.url));
  const traces = FIXTURES.map(load);
  for (const f of readdirSync(golden).filter((f) => f.endsWith(".json"))) traces.push(...JSON.parse(readFileSync(golden + f, "utf8")));
  let changes = 0;
  for (const t of traces) {
    const index = indexTrace(t);
    const state = initialState(index);
    const look = (id) => JSON.stringify([state.exists.has(id), state.pending.get(id), state.applied.has(id), state.ready.includes(id), state.grads.get(id)]);
    for (const ev of index.events) {
      const before = new Map([...index.nodes.keys()].map((id) => [id, look(id)]));
      applyEvent(state, ev);
      const named = eventNodes(ev);
      for (const [id, was] of before) {
        if (look(id) === was) continue;
        changes++;
        assert.ok(named.has(id), `${t.title}: a "${ev.type}" event changed node ${id} but eventNodes does not name it`);
      }
    }
  }
  assert.ok(changes > 1000, `only ${changes} node changes checked`);
});
