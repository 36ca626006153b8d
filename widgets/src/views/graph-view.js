// GraphView: the computation graph with a legend and an inspector (anywidget AFM).
import { h } from "../ui/dom.js";
import { injectStyles } from "../ui/inject-styles.js";
import { indexTrace } from "../trace/replay.js";
import { legend } from "../ui/legend.js";
import { renderInspector, renderScope } from "../ui/inspector.js";
import { FoldedDrawing, GraphPane, copyTrace, readOptions, now, zoomControls } from "./common.js";
import { BOX, indexFolding } from "../trace/scope-boxes.js";

export function renderGraphView({ model, el, host }) {
  const t0 = now();
  injectStyles(el);
  let trace = copyTrace(model.get("trace"));
  let index = indexTrace(trace);
  let options = readOptions(model, trace);
  let hovered = null;
  let pinned = null;
  let revealed = false; // the first picture was scrolled to the output
  const drawing = new FoldedDrawing(model);

  const title = h("div", { class: "mg-title" });
  const inspector = h("div", { class: "mg-inspector", "aria-live": "polite" });
  const root = h("div", { class: "mg-root mg-graphview" });

  // The boxes' tables, made once per folding (a hover must not walk every box's members).
  let folded = { folding: undefined, fold: null };
  const foldNow = () => {
    const { folding } = drawing.now();
    if (folded.folding !== folding) folded = { folding, fold: indexFolding(folding) };
    return folded.fold;
  };

  const inspect = () => {
    const id = hovered || pinned;
    const fold = foldNow();
    if (id && id.startsWith(BOX) && fold.boxes.has(id)) {
      renderScope(inspector, { box: fold.boxes.get(id), state: null, index });
      return;
    }
    renderInspector(inspector, {
      index,
      id,
      showValues: options.showValues,
      why: id === null ? "" : id === hovered && id !== pinned ? "under the pointer" : "pinned: click it again to unpin",
      onPick: (picked) => {
        pinned = picked;
        inspect();
      },
    });
  };

  const pane = new GraphPane({
    model,
    host,
    el,
    t0,
    drawing,
    onInspect: (id, how) => {
      if (how === "click") pinned = id && id !== pinned ? id : null;
      else hovered = id;
      inspect();
    },
    onMounted: (canvas, { anchored }) => {
      // The text talks about the output (the loss, a leaked total): a graph wider than its box
      // opens at its right end, where the output is drawn, not at the leaves.
      if (anchored || revealed) return;
      revealed = true;
      const output = [...index.nodes.values()].find((n) => n.role === "output");
      if (!output) return;
      const fold = foldNow();
      canvas.el.scrollLeft = canvas.el.scrollWidth;
      canvas.reveal(fold.boxOf.get(output.id) || output.id);
    },
  });

  const applyOptions = () => {
    options = readOptions(model, trace);
    title.textContent = options.title;
    title.hidden = !options.title;
    root.classList.toggle("mg-hide-saved", !options.showSaved);
    inspect();
  };

  root.append(
    h("div", { class: "mg-header" }, title, zoomControls(pane.canvas)),
    h("div", { class: "mg-body" }, pane.canvas.el, h("div", { class: "mg-side" }, inspector, legend())),
  );
  el.replaceChildren(root);
  applyOptions();

  const redraw = (force = false) => {
    const { dot } = drawing.now();
    const fold = foldNow();
    return pane.show({ dot, message: model.get("message"), index, force, nodeCount: fold.visible || null, folded: fold.boxes.size > 0 });
  };
  model.on("change:dot", () => redraw());
  model.on("change:expanded", () => redraw());
  model.on("change:scope_table", () => redraw());
  model.on("change:message", () => redraw());
  model.on("change:options", applyOptions);
  model.on("change:trace", () => {
    trace = copyTrace(model.get("trace"));
    index = indexTrace(trace);
    applyOptions();
  });
  redraw();
  return () => pane.dispose();
}

export default { render: renderGraphView };
