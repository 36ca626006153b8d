// The picture's scale (src/ui/graph-canvas.js zoomScale): "fit" shows the whole graph when it can,
// and never shrinks labels below a readable size.
import { test } from "node:test";
import assert from "node:assert/strict";
import { zoomScale, LABEL_UNITS, MIN_LABEL_PX } from "../src/ui/graph-canvas.js";

const readable = MIN_LABEL_PX / LABEL_UNITS;

test("fit: a small graph fits width and height, enlarged at most 1.25 times", () => {
  assert.equal(zoomScale("fit", { width: 904, height: 560 }, { w: 400, h: 200 }, 1), 1.25);
  // too tall for the box: the height decides (down to readable labels)
  assert.equal(zoomScale("fit", { width: 904, height: 804 }, { w: 400, h: 1000 }, 1), 0.8);
  assert.equal(zoomScale("fit", { width: 904, height: 504 }, { w: 400, h: 1000 }, 1), readable);
  assert.equal(zoomScale("fit", { width: 904, height: 904 }, { w: 1000, h: 1000 }, 1), 0.9);
});

test("fit: labels never below MIN_LABEL_PX (lesson 10's graph was fitted to 2-6 px)", () => {
  const scale = zoomScale("fit", { width: 904, height: 560 }, { w: 6000, h: 300 }, 1);
  assert.equal(scale, readable);
  assert.ok(LABEL_UNITS * scale >= 8);
});

test("auto (the first render) and a set zoom", () => {
  assert.equal(zoomScale("auto", { width: 904, height: 560 }, { w: 6000, h: 300 }, 1), 0.75);
  assert.equal(zoomScale("auto", { width: 504, height: 560 }, { w: 500, h: 300 }, 1), 1);
  // a drawing a little taller than the box shrinks to fit it (labels stay >= 8 px) ...
  assert.equal(zoomScale("auto", { width: 904, height: 724 }, { w: 600, h: 800 }, 1), 0.9);
  // ... a much taller one keeps the width's scale, and the box scrolls
  assert.equal(zoomScale("auto", { width: 904, height: 724 }, { w: 600, h: 3000 }, 1), 1.25);
  assert.ok(LABEL_UNITS * zoomScale("auto", { width: 904, height: 304 }, { w: 600, h: 400 }, 1) >= 8);
  assert.equal(zoomScale(false, { width: 904, height: 560 }, { w: 6000, h: 300 }, 0.4), 0.4);
});
