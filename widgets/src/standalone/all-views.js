// standalone.js: one classic script for the self-contained HTML export. It holds the layout
// engine and the three views, and runs them with a FakeModel:
//
//   window.minigrad.mount(el, {widget: "graph" | "stepper" | "memory" | "tape", trace, dot, options,
//                              message, frame, folding, expanded, scope_table})  ->  {model, destroy()}
//
// With a scope_table, a click on a box or a frame opens or closes it here (trace/open-scopes-dot.js): no kernel.
import { FakeModel } from "./fake-model.js";
import { layoutSlot } from "../layout/layout-slot.js";
import { startGraphviz } from "../layout/start-graphviz.js";
import { renderGraphView } from "../views/graph-view.js";
import { renderStepper } from "../views/backward-stepper.js";
import { renderMemoryView } from "../views/memory-view.js";
import { renderTapeView } from "../views/tape-view.js";
import { renderAotView } from "../views/aot-view.js";

const VIEWS = { graph: renderGraphView, stepper: renderStepper, memory: renderMemoryView, tape: renderTapeView, aot: renderAotView };

function ensureEngine() {
  const slot = layoutSlot();
  if (!slot.engine && !slot.starting) {
    slot.starting = startGraphviz().then((engine) => {
      slot.provide(engine);
      return engine;
    });
  }
  return slot;
}

function mount(el, { widget = "graph", trace = null, dot = "", options = {}, message = "", frame, live = false, folding = {}, expanded = [], scope_table = {} } = {}) {
  const render = VIEWS[widget];
  if (!render) throw new Error(`minigrad.mount: unknown widget ${JSON.stringify(widget)} (graph, stepper, memory, tape or aot)`);
  if (!el || typeof el.appendChild !== "function") throw new Error("minigrad.mount: el must be an element");
  if (widget !== "memory" && !message && dot) ensureEngine();
  const model = new FakeModel({
    trace,
    dot,
    options,
    message,
    folding,
    expanded,
    scope_table,
    frame: typeof frame === "number" ? frame : trace && typeof trace.initial_frame === "number" ? trace.initial_frame : 0,
    live,
    layout_engine: null,
  });
  const cleanup = render({ model, el });
  return {
    model,
    destroy() {
      if (typeof cleanup === "function") cleanup();
      model.off();
      el.replaceChildren();
    },
  };
}

const api = { version: __MINIGRAD_WIDGETS_VERSION__, mount, FakeModel };
if (typeof window !== "undefined") window.minigrad = Object.assign(window.minigrad || {}, api);
