// TapeView's fold (src/trace/tape-replay.js): any frame reached by stepping, jumping or going back
// shows the same grads, use counts, freed slots and finished instructions.
import { test } from "node:test";
import assert from "node:assert/strict";
import { TapeState } from "../src/trace/tape-replay.js";

// y = sin(x * w) with x, w vars: s2 = mul(s0, s1), s3 = sin(s2); backward seeds s3, then runs
// #1 (sin) and #0 (mul). The numbers are those document.py writes for x = 0.5, w = 2.
const DOC = {
  slots: {
    kinds: ["var", "var", "temp", "temp"],
    names: ["x", "w", null, null],
    requires_grad: [true, true, true, true],
    shapes: [[], [], [], []],
    values: [[0.5], [2], [1], [0.841471]],
    grads: [null, null, null, null],
    uses: [1, 1, 1, 0],
  },
  instrs: [
    { op: "mul", inputs: [0, 1], output: 2, attrs: {} },
    { op: "sin", inputs: [2], output: 3, attrs: {} },
  ],
  frames: [
    { position: null, grads: [[3, [1]]], uses: [], freed: [] },
    { position: 1, grads: [[2, [0.540302]]], uses: [[2, 0]], freed: [3] },
    { position: 0, grads: [[0, [1.0806]], [1, [0.270151]]], uses: [[0, 0], [1, 0]], freed: [2] },
  ],
};

const view = (st) => ({ grads: [...st.grads], uses: [...st.uses], freed: [...st.freed], done: [...st.done].sort() });

test("frame 0 is the table after forward", () => {
  const st = new TapeState(DOC);
  assert.deepEqual(view(st), { grads: [null, null, null, null], uses: [1, 1, 1, 0], freed: [0, 0, 0, 0], done: [] });
  assert.equal(st.delta(0), null);
});

test("each frame adds its delta", () => {
  const st = new TapeState(DOC);
  st.seek(1);
  assert.deepEqual(st.grads, [null, null, null, [1]]);
  st.seek(2);
  assert.deepEqual(view(st), { grads: [null, null, [0.540302], [1]], uses: [1, 1, 0, 0], freed: [0, 0, 0, 1], done: [1] });
  assert.equal(st.delta(2).position, 1);
  st.seek(3);
  assert.deepEqual(view(st), { grads: [[1.0806], [0.270151], [0.540302], [1]], uses: [0, 0, 0, 0], freed: [0, 0, 1, 1], done: [0, 1] });
});

test("going back folds again from frame 0: any route to a frame gives the same state", () => {
  const direct = [0, 1, 2, 3].map((k) => {
    const st = new TapeState(DOC);
    st.seek(k);
    return view(st);
  });
  const st = new TapeState(DOC);
  for (const k of [3, 0, 2, 1, 3, 2, 0, 1]) {
    st.seek(k);
    assert.deepEqual(view(st), direct[k], `frame ${k}`);
  }
  assert.deepEqual(DOC.slots.grads, [null, null, null, null], "the document is not changed");
});
