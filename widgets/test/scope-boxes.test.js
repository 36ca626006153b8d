// Closed scopes' boxes (src/trace/scope-boxes.js): progress while backward runs, and what a click does.
import { test } from "node:test";
import assert from "node:assert/strict";
import { indexFolding, boxProgress, progressText, toggled } from "../src/trace/scope-boxes.js";

// y = f3(f2(f1(x))), with f1 and f2 inside the scope "layer0" (closed), f3 outside.
const index = {
  nodes: new Map(
    [
      ["x", { type: "variable" }],
      ["f1", { type: "op", pending_count: 1 }],
      ["v1", { type: "variable" }],
      ["f2", { type: "op", pending_count: 1 }],
      ["v2", { type: "variable" }],
      ["f3", { type: "op", pending_count: 0 }],
      ["y", { type: "variable" }],
    ].map(([id, n]) => [id, { id, ...n }]),
  ),
};
const folding = {
  boxes: { "s:layer0": { scope: "layer0", members: ["f1", "v1", "f2", "v2"], ops: 2, border: ["f2"], kind: null, alike: 1 } },
  frames: [],
  visible: 4,
};
const state = (fields) => ({ exists: new Set(index.nodes.keys()), current: null, ready: [], applied: new Set(), pending: new Map(), backwardStarted: true, ...fields });

test("indexFolding maps each member to its box", () => {
  const fold = indexFolding(folding);
  assert.equal(fold.boxOf.get("f2"), "s:layer0");
  assert.equal(fold.boxOf.get("f3"), undefined);
  assert.equal(fold.visible, 4);
  assert.equal(indexFolding(undefined).boxes.size, 0);
});

test("before backward reaches the box: nothing run, one gradient pending across its border", () => {
  const box = folding.boxes["s:layer0"];
  const p = boxProgress(box, state({ applied: new Set(["f3"]), current: "f3", pending: new Map([["f2", 1]]) }), index);
  assert.deepEqual(p, { run: 0, total: 2, exists: true, current: false, ready: false, pending: 1, done: false });
  assert.equal(progressText(p, true), "run 0/2 · 1 pending in");
});

test("the current node inside the box, then the box done", () => {
  const box = folding.boxes["s:layer0"];
  const running = boxProgress(box, state({ applied: new Set(["f3", "f2"]), current: "f2", ready: ["f1"], pending: new Map([["f2", 0]]) }), index);
  assert.equal(running.current, true);
  assert.equal(running.ready, true);
  assert.equal(running.run, 1);
  assert.equal(progressText(running, true), "run 1/2");
  const done = boxProgress(box, state({ applied: new Set(["f3", "f2", "f1"]) }), index);
  assert.equal(done.done, true);
  assert.equal(progressText(done, false), "", "no progress text before backward starts");
});

test("a box does not exist before its first member is made (forward)", () => {
  const p = boxProgress(folding.boxes["s:layer0"], state({ exists: new Set(["x"]), backwardStarted: false }), index);
  assert.equal(p.exists, false);
});

test("a click on a box opens its scope, a click on a frame closes it", () => {
  assert.deepEqual(toggled(["blocks.0"], "s:layer0"), ["blocks.0", "layer0"]);
  assert.deepEqual(toggled(["blocks.0", "layer0"], "c:layer0"), ["blocks.0"]);
  assert.deepEqual(toggled(undefined, "s:a"), ["a"]);
  assert.deepEqual(toggled(["a"], "v3"), ["a"]);
});
