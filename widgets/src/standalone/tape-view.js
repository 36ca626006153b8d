// The HTML export's script for a TapeView: the tape view alone, without the Graphviz layout
// engine that standalone.js carries for the graph views (a tape has no graph to lay out), so a
// saved tape page weighs tens of KiB instead of ~700. Same entry point as standalone.js:
//
//   window.minigrad.mount(el, {widget: "tape", trace, options, message, frame})  ->  {model, destroy()}
import { FakeModel } from "./fake-model.js";
import { renderTapeView } from "../views/tape-view.js";

function mount(el, { widget = "tape", trace = null, options = {}, message = "", frame = 0 } = {}) {
  if (widget !== "tape") throw new Error(`minigrad.mount: this page's script draws a tape, not ${JSON.stringify(widget)}`);
  if (!el || typeof el.appendChild !== "function") throw new Error("minigrad.mount: el must be an element");
  const model = new FakeModel({ trace, options, message, frame: typeof frame === "number" ? frame : 0, live: false });
  const cleanup = renderTapeView({ model, el });
  return {
    model,
    destroy() {
      cleanup();
      model.off();
      el.replaceChildren();
    },
  };
}

if (typeof window !== "undefined") window.minigrad = Object.assign(window.minigrad || {}, { version: __MINIGRAD_WIDGETS_VERSION__, mount, FakeModel });
