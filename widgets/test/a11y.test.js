// The pure parts of the widgets' accessibility (src/ui/a11y.js) and the memory chart's step axis
// (src/ui/memory-charts.js): names that say a node's state, arrow-key moves, which keys a focused
// element keeps, and where events sit on an axis counted in steps.
import { test } from "node:test";
import assert from "node:assert/strict";
import { nodeName, nearestInDirection, readingOrder, ownsKey, blockName } from "../src/ui/a11y.js";
import { eventSteps, phaseRuns } from "../src/ui/memory-charts.js";

test("a node's name says its state: running, ready, done, pending count", () => {
  assert.equal(nodeName("op mul", {}), "op mul");
  assert.equal(nodeName("op mul", { pending: 2 }), "op mul, 2 pending gradients");
  assert.equal(nodeName("op mul", { ready: true, pending: 0 }), "op mul, ready, 0 pending gradients");
  assert.equal(nodeName("op mul", { current: true, ready: true, pending: 0 }), "op mul, running now, ready, 0 pending gradients");
  assert.equal(nodeName("op mul", { done: true, ready: true }), "op mul, backward done"); // (done wins over ready)
  assert.equal(nodeName("op mul", { future: true, pending: 1 }), "op mul, not created yet");
  assert.equal(nodeName("op add", { pending: 1 }), "op add, 1 pending gradient");
});

test("a variable's name tells = (first write) from += (summed)", () => {
  const first = nodeName("parameter W", { grad: { first: true, text: "0.5" } });
  const summed = nodeName("parameter W", { grad: { first: false, text: "1.5" }, fresh: true });
  assert.equal(first, "parameter W, gradient assigned (=) 0.5");
  assert.equal(summed, "parameter W, gradient summed (+=) 1.5, written this step");
  assert.equal(nodeName("intermediate h", { grad: { first: true, text: "" }, dropped: true }), "intermediate h, gradient assigned (=), dropped after backward");
});

// a -> b -> d and a -> c -> d, left to right, c below b; e far below, left of d.
const PLACES = new Map([
  ["a", { x: 0, y: 50 }],
  ["b", { x: 100, y: 20 }],
  ["c", { x: 100, y: 80 }],
  ["d", { x: 200, y: 50 }],
  ["e", { x: 150, y: 400 }],
]);

test("arrow keys move to the nearest node in that direction", () => {
  assert.equal(nearestInDirection(PLACES, "a", "ArrowRight"), "b"); // (b and c tie in distance; b is first)
  assert.equal(nearestInDirection(PLACES, "b", "ArrowDown"), "c");
  assert.equal(nearestInDirection(PLACES, "c", "ArrowUp"), "b");
  assert.equal(nearestInDirection(PLACES, "b", "ArrowRight"), "d");
  assert.equal(nearestInDirection(PLACES, "d", "ArrowLeft"), "b");
  assert.equal(nearestInDirection(PLACES, "c", "ArrowDown"), "e");
  assert.equal(nearestInDirection(PLACES, "d", "ArrowRight"), null); // the edge: nowhere to go
  assert.equal(nearestInDirection(PLACES, "a", "ArrowLeft"), null);
  assert.equal(nearestInDirection(PLACES, "a", "Enter"), null);
  assert.equal(nearestInDirection(PLACES, "zz", "ArrowRight"), null);
});

test("from every node, every other node can be reached with arrow keys", () => {
  for (const start of PLACES.keys()) {
    const seen = new Set([start]);
    const todo = [start];
    while (todo.length) {
      const at = todo.pop();
      for (const key of ["ArrowRight", "ArrowLeft", "ArrowUp", "ArrowDown"]) {
        const to = nearestInDirection(PLACES, at, key);
        if (to && !seen.has(to)) {
          seen.add(to);
          todo.push(to);
        }
      }
    }
    assert.equal(seen.size, PLACES.size, `from ${start}: ${[...seen]}`);
  }
});

test("reading order is left to right, then top to bottom", () => {
  assert.deepEqual(readingOrder(PLACES), ["a", "b", "c", "e", "d"]);
});

const el = (tagName, extra = {}) => ({ tagName, getAttribute: (n) => (extra.attrs || {})[n] ?? null, ...extra });

test("a focused button keeps Space and Enter; the view may take its arrows", () => {
  const button = el("BUTTON");
  assert.equal(ownsKey(button, " "), true);
  assert.equal(ownsKey(button, "Enter"), true);
  assert.equal(ownsKey(button, "ArrowRight"), false);
  assert.equal(ownsKey(el("g", { attrs: { role: "button" } }), " "), true);
  assert.equal(ownsKey(el("DIV"), " "), false); // the widget's box itself: Space plays
  assert.equal(ownsKey(el("DIV", { attrs: { role: "img" } }), " "), false);
});

test("fields, selects and sliders keep every key", () => {
  for (const key of [" ", "Enter", "ArrowLeft", "Home", "a"]) {
    assert.equal(ownsKey(el("INPUT", { type: "range" }), key), true, key);
    assert.equal(ownsKey(el("INPUT", { type: "text" }), key), true, key);
    assert.equal(ownsKey(el("SELECT"), key), true, key);
    assert.equal(ownsKey(el("TEXTAREA"), key), true, key);
    assert.equal(ownsKey(el("DIV", { isContentEditable: true }), key), true, key);
  }
  assert.equal(ownsKey(el("INPUT", { type: "checkbox" }), " "), true);
  assert.equal(ownsKey(el("INPUT", { type: "checkbox" }), "ArrowRight"), false);
  assert.equal(ownsKey(null, " "), false);
});

test("a memory block's name says what it holds and its state", () => {
  assert.equal(
    blockName({ kindText: "gradient", owner: "W", size: "256 B", offset: "1.0 KiB", state: "alive" }),
    "gradient for W, 256 B at offset 1.0 KiB: alive",
  );
  assert.match(blockName({ kindText: "saved for backward", owner: "h", size: "8 B", offset: "0 B", state: "popped" }), /popped with its arena$/);
});

test("events sit inside their step's column, never on its edges", () => {
  // step 0: events 0..2, step 1: event 3, step 2: events 4..5
  const x = eventSteps([2, 3, 5], 6);
  assert.deepEqual(x, [0.25, 0.5, 0.75, 1.5, 2 + 1 / 3, 2 + 2 / 3]);
  for (let i = 1; i < x.length; i++) assert.ok(x[i] > x[i - 1]);
  // The last event (a pop, say) sits before the end of the last step's column.
  assert.ok(x[5] < 3);
  assert.deepEqual(eventSteps([], 2), [0, 0]);
});

test("phase runs: the first step of each run of one phase", () => {
  assert.deepEqual(phaseRuns(["forward", "forward", "backward", "recompute", "backward", "released"]), [
    { step: 0, phase: "forward" },
    { step: 2, phase: "backward" },
    { step: 3, phase: "recompute" },
    { step: 4, phase: "backward" },
    { step: 5, phase: "released" },
  ]);
});
