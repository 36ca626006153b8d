// The Graphviz backend as built (build/graphviz-worker.js, written by `npm run build`), run in
// Node: the re-encoded WebAssembly unpacks, and a trace's DOT becomes SVG with the ids the
// views look for. Skipped when the bundle has not been built.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { dotFromTrace } from "./support-dot.js";

const bundle = fileURLToPath(new URL("../build/graphviz-worker.js", import.meta.url));
const fixture = (name) => JSON.parse(readFileSync(fileURLToPath(new URL(`./fixtures/${name}.json`, import.meta.url)), "utf8"));
const built = existsSync(bundle);

async function backend() {
  if (!globalThis.__minigrad_viz_backend) new Function(readFileSync(bundle, "utf8"))();
  const b = globalThis.__minigrad_viz_backend;
  await b.ready();
  return b;
}

test("the backend lays out a trace's DOT into SVG with trace ids", { skip: !built && "run npm run build first" }, async () => {
  const b = await backend();
  const t = fixture("diamond");
  const { svg } = await b.layout(dotFromTrace(t));
  for (const n of t.nodes) assert.match(svg, new RegExp(`<g id="${n.id}" class="node (op|var [a-z]+)"`), n.id);
  t.edges.forEach((e, k) => assert.match(svg, new RegExp(`<g id="e${k}" class="edge ${e.kind}"`), `e${k}`));
});

test("user text is escaped by Graphviz", { skip: !built && "run npm run build first" }, async () => {
  const b = await backend();
  const { svg } = await b.layout(dotFromTrace(fixture("xss")));
  assert.ok(!svg.includes("<img"), "a node name must not become markup");
  assert.ok(svg.includes("&lt;img src=x onerror=alert(1)&gt;"));
});

test("a DOT error is reported, not thrown past the API", { skip: !built && "run npm run build first" }, async () => {
  const b = await backend();
  await assert.rejects(() => b.layout("digraph { a -> }"), /syntax error/i);
});
