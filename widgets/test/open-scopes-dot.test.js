// src/trace/open-scopes-dot.js: DOT quoting as Python's graphviz package does it (the examples are that
// package's own doctests), and a click's new picture drawn without the kernel.
import { test } from "node:test";
import assert from "node:assert/strict";
import { quote, prepareScopes, refold } from "../src/trace/open-scopes-dot.js";

test("quote: bare DOT IDs stay bare, the rest is quoted with its quotes escaped", () => {
  assert.equal(quote("spam"), "spam");
  assert.equal(quote("spam spam"), '"spam spam"');
  assert.equal(quote("-4.2"), "-4.2");
  assert.equal(quote(".42"), ".42");
  assert.equal(quote("<<b>spam</b>>"), "<<b>spam</b>>");
  assert.equal(quote('"'), '"\\""');
  assert.equal(quote('\\"'), '"\\""');
  assert.equal(quote('\\\\"'), '"\\\\\\""');
  assert.equal(quote(""), '""');
  assert.equal(quote("graph"), '"graph"'); // a DOT keyword
  assert.equal(quote("#9ca3af"), '"#9ca3af"');
});

// x -> f1 -> v1 -> f2 -> y, with f1 and v1 in scope "a".
const trace = {
  nodes: [
    { id: "v0", type: "variable", role: "data", label: "x", shape: [2] },
    { id: "f1", type: "op", label: "tanh" },
    { id: "v1", type: "variable", role: "intermediate", label: "tanh", shape: [2] },
    { id: "f2", type: "op", label: "sum" },
    { id: "v2", type: "variable", role: "output", label: "sum", shape: [] },
  ],
  edges: [
    { kind: "parent", source: "v0", target: "f1" },
    { kind: "output", source: "f1", target: "v1" },
    { kind: "parent", source: "v1", target: "f2" },
    { kind: "output", source: "f2", target: "v2" },
  ],
};
const table = {
  scopes: ["a"], paths: [[], [0]], path_of: [0, 1, 1, 0, 0], ops: [1], border: [["f1"]], signature: [0],
  style: { head: "digraph {\n", node: { data: {}, intermediate: {}, output: {}, op: {}, scope: {} }, edge: { parent: {}, output: {} }, frame: {}, show_saved: true },
};

test("closed: one box for the scope, one edge in and one out; open: a frame around its nodes", () => {
  const kit = prepareScopes(trace, table, table.style);
  const closed = refold(kit, []);
  assert.deepEqual(Object.keys(closed.folding.boxes), ["s:a"]);
  assert.deepEqual(closed.folding.boxes["s:a"].members, ["f1", "v1"]);
  assert.equal(closed.folding.visible, 4);
  assert.match(closed.dot, /\tv0 -> box0 \[class="parent scope-edge" id=b0\]/);
  assert.match(closed.dot, /\tbox0 -> f2 \[class="parent scope-edge" id=b2\]/);
  const open = refold(kit, ["a", "not a scope"]);
  assert.deepEqual(open.folding, { boxes: {}, frames: ["c:a"], visible: 5 });
  assert.match(open.dot, /\tsubgraph cluster_0 \{\n\t\tgraph \[id="c:a" label=a\]\n\t\tf1 \[label=tanh/);
  assert.equal(prepareScopes(trace, {}, table.style), null); // no scopes: the kernel's DOT
});
