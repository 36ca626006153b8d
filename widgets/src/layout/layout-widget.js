// static/viz.js: the ESM of minigrad's shared layout-engine widget (one per kernel).
//
// anywidget runs initialize() when the engine's model is created on the page, which happens
// when its comm opens, whether or not the model is ever displayed. initialize() starts the
// Graphviz engine once per page and hands it to the views through globalThis.__minigrad_viz
// (layout-slot.js). It returns at once (anywidget gives a model two seconds to initialize):
// the engine arrives later through the promise. With anywidget >= 0.10 the returned object is
// also the widget's exports ({engine: promise}), which views may reach through host.getWidget().
import { layoutSlot, resetFailedSlot } from "./layout-slot.js";
import { startGraphviz } from "./start-graphviz.js";

function ensureEngine() {
  let slot = layoutSlot();
  if (slot.engine && slot.engine.mode === "failed" && !slot.starting) slot = resetFailedSlot();
  if (!slot.engine && !slot.starting) {
    slot.starting = startGraphviz().then((engine) => {
      slot.provide(engine);
      return engine;
    });
  }
  return slot.starting || slot;
}

export default {
  initialize(context) {
    const engine = ensureEngine();
    // anywidget < 0.10 treats a returned value as a cleanup function; newer versions (which
    // pass `signal`) read an object as the widget's exports.
    if (context && "signal" in context) return { engine };
    return undefined;
  },
  render({ el }) {
    // The engine has nothing to show.
    el.style.display = "none";
  },
};
