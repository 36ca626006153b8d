// How a view gets the layout engine.
//
// The engine lives in its own anywidget model (static/viz.js), shared by every view of a kernel
// and referenced by each view's `layout_engine` trait. Its initialize() provides the engine on
// globalThis.__minigrad_viz (layout-slot.js), usually before a view renders, but nothing
// guarantees the order: a view may render while the engine's ESM is still being imported. So
// a view waits on the slot's promise, and meanwhile asks the widget manager for the engine's
// model (that is what makes a manager that creates models lazily create it, and so run its
// initialize()). After `timeoutMs` it tells the reader, and keeps waiting.
import { layoutSlot } from "./layout-slot.js";

/** The model id in a widget reference: "IPY_MODEL_<id>" (widget_serialization) or "anywidget:<id>". */
export function referencedModelId(ref) {
  if (typeof ref !== "string") return null;
  if (ref.startsWith("IPY_MODEL_")) return ref.slice("IPY_MODEL_".length) || null;
  if (ref.startsWith("anywidget:")) return ref.slice("anywidget:".length) || null;
  return null;
}

function nudge(model, host) {
  let ref;
  try {
    ref = model.get("layout_engine");
  } catch (_) {
    return;
  }
  const id = referencedModelId(ref);
  if (!id) return;
  const slot = layoutSlot();
  try {
    if (host && typeof host.getWidget === "function") {
      // anywidget >= 0.10: waits for the engine model's initialize() and returns its exports.
      Promise.resolve(host.getWidget(`anywidget:${id}`))
        .then((widget) => {
          const engine = widget && widget.exports && widget.exports.engine;
          if (engine && typeof engine.then === "function") engine.then((e) => e && slot.provide(e));
        })
        .catch(() => {});
    } else if (model.widget_manager && typeof model.widget_manager.get_model === "function") {
      Promise.resolve(model.widget_manager.get_model(id)).catch(() => {});
    }
  } catch (_) {
    /* best effort */
  }
}

/**
 * Resolve to the engine ({mode, layout(dot, options)}). onSlow() is called once if it has not
 * arrived after timeoutMs.
 */
export function waitForLayout({ model, host, timeoutMs = 20000, onSlow } = {}) {
  const slot = layoutSlot();
  if (slot.engine) return Promise.resolve(slot.engine);
  if (model) nudge(model, host);
  let timer = null;
  if (onSlow) timer = setTimeout(onSlow, timeoutMs);
  return slot.then((engine) => {
    if (timer) clearTimeout(timer);
    return engine;
  });
}
