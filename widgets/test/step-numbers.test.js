// The one step numbering (src/trace/step-numbers.js): step 0 is before anything ran, step k after k steps.
import { test } from "node:test";
import assert from "node:assert/strict";
import { stepText, traceStepText } from "../src/trace/step-numbers.js";

test("a frame index is the step number (AotView, TapeView: view.frame = 3 shows step 3)", () => {
  assert.equal(stepText(0, 6), "step 0 of 6");
  assert.equal(stepText(3, 6), "step 3 of 6");
  assert.equal(stepText(2, 2, true), "step 2 of 2+");
});

test("a stepper counts backward steps from where forward ended (lesson 00: step 4 runs add)", () => {
  // lesson 00's graph: 8 forward frames (4 leaves, 4 ops; frame 7 ends forward), then the seed
  // and 4 ops' backward (frames 8..12), then the release (frame 13)
  assert.equal(traceStepText(7, 7, 7, true), "step 0 of 0+");
  assert.equal(traceStepText(8, 7, 8, true), "step 1 of 1+");
  assert.equal(traceStepText(11, 7, 13), "step 4 of 6");
  assert.equal(traceStepText(13, 7, 13), "step 6 of 6");
});

test("forward frames are counted apart and never as steps", () => {
  assert.equal(traceStepText(0, 7, 13), "forward: 1 of 8 recorded");
  assert.equal(traceStepText(6, 7, 13), "forward: 7 of 8 recorded");
  // a trace with no forward frames (initial 0), or an initial frame past what is recorded
  assert.equal(traceStepText(0, 0, 3), "step 0 of 3");
  assert.equal(traceStepText(2, 9, 2), "step 0 of 0");
});
