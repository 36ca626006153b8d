// The rendezvous between the engine widget and the views (src/layout/layout-slot.js,
// src/layout/wait-for-layout.js): whichever side comes first, the views get the engine.
import { test, beforeEach } from "node:test";
import assert from "node:assert/strict";
import { layoutSlot, resetFailedSlot, LAYOUT_ENGINE_KEY } from "../src/layout/layout-slot.js";
import { waitForLayout, referencedModelId } from "../src/layout/wait-for-layout.js";

beforeEach(() => {
  delete globalThis[LAYOUT_ENGINE_KEY];
});

const model = (ref, calls = []) => ({
  get: (name) => (name === "layout_engine" ? ref : undefined),
  widget_manager: { get_model: (id) => (calls.push(id), Promise.resolve({})) },
});

test("widget references: IPY_MODEL_ (widget_serialization) and anywidget: (WidgetTrait)", () => {
  assert.equal(referencedModelId("IPY_MODEL_abc123"), "abc123");
  assert.equal(referencedModelId("anywidget:abc123"), "abc123");
  assert.equal(referencedModelId(null), null);
  assert.equal(referencedModelId("IPY_MODEL_"), null);
  assert.equal(referencedModelId({}), null);
});

test("engine first, view second: the view gets it at once", async () => {
  const engine = { mode: "worker" };
  layoutSlot().provide(engine);
  assert.equal(await waitForLayout({ model: model("IPY_MODEL_e") }), engine);
});

test("view first, engine second: the view waits, and asks the manager for the engine model", async () => {
  const calls = [];
  const waiting = waitForLayout({ model: model("IPY_MODEL_e1", calls) });
  assert.deepEqual(calls, ["e1"], "get_model makes a lazy manager create the engine model");
  const engine = { mode: "worker" };
  setTimeout(() => layoutSlot().provide(engine), 10);
  assert.equal(await waiting, engine);
});

test("anywidget >= 0.10: the engine's exports through host.getWidget", async () => {
  const engine = { mode: "worker" };
  const asked = [];
  const host = { getWidget: async (ref) => (asked.push(ref), { exports: { engine: Promise.resolve(engine) } }) };
  const got = await waitForLayout({ model: model("IPY_MODEL_e2"), host });
  assert.equal(got, engine);
  assert.deepEqual(asked, ["anywidget:e2"]);
});

test("the first engine provided wins; a failed one can be replaced", async () => {
  const slot = layoutSlot();
  assert.equal(slot.provide({ mode: "failed", error: "no wasm" }), true);
  assert.equal(slot.provide({ mode: "worker" }), false);
  const fresh = resetFailedSlot();
  assert.notEqual(fresh, slot);
  fresh.provide({ mode: "page" });
  assert.equal((await waitForLayout({})).mode, "page");
});

test("onSlow fires when the engine does not come, and the wait goes on", async () => {
  let slow = 0;
  const waiting = waitForLayout({ model: model(null), timeoutMs: 20, onSlow: () => slow++ });
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(slow, 1);
  layoutSlot().provide({ mode: "worker" });
  assert.equal((await waiting).mode, "worker");
});
