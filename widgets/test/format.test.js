// Short text on the pictures (src/text/format.js): tags and names that cannot be misread.
import { test } from "node:test";
import assert from "node:assert/strict";
import { tagValues, middleEllipsis, shapeText, shapeInParens } from "../src/text/format.js";

test("a vector's gradient tag is bracketed, a scalar's is its value", () => {
  assert.equal(tagValues([1, 1, 1], 3), "[1, …]");
  assert.equal(tagValues([-0.25], 1), "-0.25");
});

test("long names are cut in the middle, so that two with one prefix stay apart", () => {
  const a = middleEllipsis("blocks.0.attn_norm.weight");
  const b = middleEllipsis("blocks.0.attn_norm.output");
  assert.notEqual(a, b);
  assert.equal(a.length, 17);
  assert.ok(a.startsWith("blocks.0") && a.endsWith(".weight"), a);
  assert.equal(middleEllipsis("d_layer1"), "d_layer1");
});

test("a shape is written as Python's drawings write it: \"x\" between sizes, a vector as numpy writes it", () => {
  assert.equal(shapeText([2]), "(2,)");
  assert.equal(shapeText([3, 2]), "3x2");
  assert.equal(shapeText([2, 3, 4]), "2x3x4");
  assert.equal(shapeText([]), "scalar");
  // after a name, as the trace's sentences write it (Python's names.shape_in_parens)
  assert.equal(shapeInParens([5]), "(5,)");
  assert.equal(shapeInParens([3, 2]), "(3x2)");
  assert.equal(shapeInParens([]), "(scalar)");
});
