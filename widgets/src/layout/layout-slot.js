// The meeting point between the layout engine and the views on one page.
//
// globalThis.__minigrad_viz is a promise of the engine, with `provide(engine)` attached.
// Whoever comes first creates it: the engine model's initialize() (viz.js) or a view that
// renders before the engine has arrived. Both sides call layoutSlot(), so the order in which
// anywidget loads the models does not matter. The promise never rejects: an engine that
// could not start is provided as {mode: "failed", error}.
export const LAYOUT_ENGINE_KEY = "__minigrad_viz";

export function layoutSlot(g = globalThis) {
  let slot = g[LAYOUT_ENGINE_KEY];
  if (!slot || typeof slot.then !== "function" || typeof slot.provide !== "function") {
    let resolve;
    slot = new Promise((r) => (resolve = r));
    slot.engine = null;
    slot.starting = null;
    slot.provide = (engine) => {
      if (slot.engine) return false;
      slot.engine = engine;
      resolve(engine);
      return true;
    };
    g[LAYOUT_ENGINE_KEY] = slot;
  }
  return slot;
}

/** A new, empty slot in place of one whose engine failed (so that a later engine can try again). */
export function resetFailedSlot(g = globalThis) {
  const slot = g[LAYOUT_ENGINE_KEY];
  if (slot && slot.engine && slot.engine.mode === "failed") g[LAYOUT_ENGINE_KEY] = undefined;
  return layoutSlot(g);
}
