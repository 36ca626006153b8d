// What the three views share: reading the traits, and the graph pane (wait for the engine, lay
// out once per DOT, report timings on the widget's element).
import { h } from "../ui/dom.js";
import { GraphCanvas, layoutAttributes } from "../ui/graph-canvas.js";
import { waitForLayout } from "../layout/wait-for-layout.js";
import { count } from "../text/format.js";
import { BOX, indexFolding, toggled } from "../trace/scope-boxes.js";
import { layoutSlot } from "../layout/layout-slot.js";
import { prepareScopes, refold } from "../trace/open-scopes-dot.js";

export const ENGINE_TIMEOUT_MS = 20000;
const LAYOUTS_KEPT = 8;
const PREFETCH_AFTER_MS = 120;
const SAVE_WITHIN_MS = 1000; // how long the pointer rests on a box before its layout starts

const EMPTY_TRACE = { schema: "minigrad-trace", version: 1, title: null, nodes: [], edges: [], arenas: [], blocks: [], events: [], frames: [], initial_frame: 0 };

/** A private copy of the trace's growing lists, so that appended events never touch the model's value. */
export function copyTrace(trace) {
  const t = trace && typeof trace === "object" ? trace : EMPTY_TRACE;
  return {
    ...EMPTY_TRACE,
    ...t,
    nodes: t.nodes || [],
    edges: t.edges || [],
    events: [...(t.events || [])],
    frames: [...(t.frames || [])],
    blocks: [...(t.blocks || [])],
    arenas: [...(t.arenas || [])],
  };
}

export function readOptions(model, trace) {
  const o = (model.get("options") || {});
  return {
    showSaved: o.show_saved !== false,
    showValues: o.show_values !== false,
    order: o.order === "topo" ? "topo" : "pending",
    title: typeof o.title === "string" && o.title ? o.title : (trace && trace.title) || "",
  };
}

/**
 * What the graph pane draws now, {dot, folding}. With a `scope_table` the page writes the DOT
 * for the open scopes (`expanded`) itself (trace/open-scopes-dot.js), so opening a box waits for no kernel;
 * without one (no scopes, or an older kernel) it draws the kernel's `dot` and `folding`.
 */
export class FoldedDrawing {
  constructor(model) {
    this.model = model;
    this.kit = null;
    this.made = new Map(); // the last few drawings, by their list of open scopes
  }

  now() {
    const m = this.model;
    return this.for(m.get("expanded") || []) || { dot: m.get("dot"), folding: m.get("folding") };
  }

  /** What would be drawn with the scopes in `expanded` open (null without a scope table). */
  for(expanded) {
    const m = this.model;
    const table = m.get("scope_table");
    const trace = m.get("trace");
    if (!this.kit || this.kit.table !== table || this.kit.trace !== trace) {
      this.kit = prepareScopes(trace, table, table && table.style);
      this.made = new Map();
    }
    if (!this.kit) return null;
    const key = expanded.join("\u0000");
    if (!this.made.has(key)) {
      this.made.set(key, refold(this.kit, expanded));
      if (this.made.size > 4) this.made.delete(this.made.keys().next().value);
    }
    return this.made.get(key);
  }
}

export function now() {
  return typeof performance !== "undefined" ? performance.now() : Date.now();
}

/** Run fn after the next paint (or soon, where there are no animation frames). */
export function afterPaint(fn) {
  if (typeof requestAnimationFrame === "function") {
    let done = false;
    const once = () => {
      if (!done) {
        done = true;
        fn();
      }
    };
    requestAnimationFrame(() => setTimeout(once, 0));
    setTimeout(once, 250); // hidden tabs get no animation frames
  } else setTimeout(fn, 0);
}

const SLOW =
  "The graph layout engine (Graphviz, minigrad's shared layout-engine widget) has not arrived after " +
  `${ENGINE_TIMEOUT_MS / 1000} s. Run the cell again; if that does not help, restart the kernel and ` +
  "reload the page. (It is still being waited for: the graph appears if it arrives.)";

/**
 * The graph part of a view. show({dot, message, index}) lays the graph out (or shows the
 * message), at most once per DOT; onMounted(canvas, {anchored}) runs after each new picture
 * (anchored: after a click on a box or frame, which the pane keeps in place).
 */
export class GraphPane {
  constructor({ model, host, el, t0, badges = false, gradTags = false, onMounted, onInspect, onToggle, drawing = null }) {
    this.model = model;
    this.host = host;
    this.el = el;
    this.t0 = t0;
    this.options = { badges, gradTags };
    this.onMounted = onMounted || (() => {});
    this.drawing = drawing; // a FoldedDrawing: lets a box under the pointer be laid out ahead
    this.restTimer = null;
    this.prefetching = false;
    this.saveTimer = null; // a click's `expanded`, not yet sent to the kernel
    const inspect = onInspect || (() => {});
    this.canvas = new GraphCanvas({
      onInspect: (id, how) => {
        if (how === "hover") this.pointerOn(id);
        inspect(id, how);
      },
      onToggle: onToggle || ((id) => this.toggle(id)),
    });
    this.token = 0;
    this.dot = null;
    this.message = null;
    this.painted = false;
    this.anchor = null; // after a click on a box or frame: where to keep it in the next picture
    // The last few layouts by DOT (promises): closing a box brings back a picture already laid
    // out, and a box the pointer rests on is laid out before the click.
    this.layouts = new Map();
    this.disposed = false;
  }

  get mounted() {
    return !!this.canvas.svg;
  }

  /** A box or a frame was clicked: open or close its scope (the view redraws on
   * change:expanded; the kernel follows). */
  toggle(id) {
    const expanded = toggled(this.model.get("expanded"), id);
    delete this.el.dataset.toggleMs;
    this.el.dataset.toggledAt = String(now());
    // Seen at once while the kernel answers and Graphviz lays the new picture out.
    const clicked = this.canvas.nodes.get(id) || { g: this.canvas.frames.get(id) };
    if (clicked.g) clicked.g.classList.add("mg-opening");
    // What is around the click stays where it is: the new picture keeps the scale and is
    // scrolled so that the nodes near the clicked box or frame do not move (GraphCanvas.keepNear).
    this.anchor = { id, before: this.canvas.places() };
    this.model.set("expanded", expanded);
    // The kernel hears of it once the new picture is on the page (at the latest after
    // SAVE_WITHIN_MS): its own redraw of `dot` then does not compete with the layout here.
    clearTimeout(this.saveTimer);
    this.saveTimer = setTimeout(() => this.saveNow(), SAVE_WITHIN_MS);
  }

  saveNow() {
    if (this.saveTimer === null) return;
    clearTimeout(this.saveTimer);
    this.saveTimer = null;
    this.model.save_changes();
  }

  /** The pointer rests on a box: lay out its opened picture now, so a click finds it ready. */
  pointerOn(id) {
    clearTimeout(this.restTimer);
    if (!id || !id.startsWith(BOX) || !this.drawing) return;
    this.restTimer = setTimeout(() => this.prefetch(id), PREFETCH_AFTER_MS);
  }

  async prefetch(id) {
    const slot = layoutSlot();
    if (this.prefetching || this.disposed || !this.mounted || !slot.engine || slot.engine.mode === "failed") return;
    const drawn = this.drawing.for(toggled(this.model.get("expanded"), id));
    if (!drawn) return;
    const fold = indexFolding(drawn.folding);
    this.prefetching = true;
    try {
      await this.layout(slot.engine, drawn.dot, fold.visible || 0, fold.boxes.size > 0);
    } catch (_) {
      // (a click will try again and say what went wrong)
    } finally {
      this.prefetching = false;
    }
  }

  /** Lay a DOT out, or take the layout kept (or being made) for it: {svg, ms, reused}. */
  layout(engine, dot, nodeCount, folded) {
    const graphAttributes = layoutAttributes(nodeCount, { folded });
    const key = `${JSON.stringify(graphAttributes)}\n${dot}`;
    let kept = this.layouts.get(key);
    // reused: laid out before this was asked for (still running: waited for, not reused)
    const reused = !!kept && kept.done;
    if (!kept) {
      kept = { done: false, promise: engine.layout(dot, { graphAttributes, nodeCount }) };
      const entry = kept;
      entry.promise.then(
        () => (entry.done = true),
        () => this.layouts.get(key) === entry && this.layouts.delete(key),
      );
    }
    this.layouts.delete(key);
    this.layouts.set(key, kept);
    if (this.layouts.size > LAYOUTS_KEPT) this.layouts.delete(this.layouts.keys().next().value);
    return kept.promise.then((result) => ({ svg: result.svg, ms: result.ms, reused }));
  }

  /** nodeCount: how many nodes the DOT draws (boxes count as one). */
  async show({ dot, message, index, force = false, nodeCount = null, folded = false }) {
    dot = typeof dot === "string" ? dot : "";
    message = typeof message === "string" ? message : "";
    if (!force && dot === this.dot && message === this.message) return;
    this.dot = dot;
    this.message = message;
    // (after a click on a box: how long until the new DOT, made here or sent by the kernel)
    if (this.el.dataset.toggledAt) this.el.dataset.toggleAnswerMs = (now() - +this.el.dataset.toggledAt).toFixed(1);
    const token = ++this.token;
    const canvas = this.canvas;
    if (message) {
      canvas.showMessage(message, "info");
      this.el.dataset.graph = "message";
      return;
    }
    if (!dot.trim()) {
      canvas.showMessage("There is no graph to draw.", "info");
      this.el.dataset.graph = "empty";
      return;
    }
    this.el.dataset.graph = "waiting";
    // (A new DOT for a mounted picture, after a click on a box: the old one stays meanwhile.)
    const keep = canvas.svg !== null && !this.message;
    if (!keep) canvas.showMessage("Loading the graph layout engine…", "loading");
    const waitStart = now();
    const engine = await waitForLayout({
      model: this.model,
      host: this.host,
      timeoutMs: ENGINE_TIMEOUT_MS,
      onSlow: () => {
        if (token === this.token && !this.disposed) {
          canvas.showMessage(SLOW, "error");
          this.el.dataset.graph = "no-engine";
        }
      },
    });
    const waited = now() - waitStart;
    if (token !== this.token || this.disposed) return;
    if (!this.painted) this.el.dataset.engineWaitMs = waited.toFixed(1);
    this.el.dataset.engineMode = engine.mode;
    if (engine.mode === "failed") {
      canvas.showMessage(`The graph layout engine could not start: ${engine.error}`, "error");
      this.el.dataset.graph = "error";
      return;
    }
    if (nodeCount === null) nodeCount = index ? index.nodes.size : 0;
    if (!keep) canvas.showMessage(`Laying out ${count(nodeCount)} nodes…`, "loading");
    let result;
    try {
      result = await this.layout(engine, dot, nodeCount, folded);
    } catch (error) {
      if (token !== this.token || this.disposed) return;
      const text =
        error && error.name === "LayoutTimeout"
          ? `Graphviz did not finish laying out this graph (${count(nodeCount)} nodes) in time and was ` +
            "stopped, so that the page stays responsive. Draw a smaller piece of the graph."
          : `Graphviz could not lay out this graph (${count(nodeCount)} nodes): ${(error && error.message) || error}`;
      canvas.showMessage(text, "error");
      this.el.dataset.graph = "error";
      return;
    }
    if (token !== this.token || this.disposed) return;
    const mountStart = now();
    const anchor = this.anchor;
    this.anchor = null;
    try {
      canvas.mount(result.svg, index, { ...this.options, keepScale: !!anchor });
    } catch (error) {
      canvas.showMessage(String(error.message || error), "error");
      this.el.dataset.graph = "error";
      return;
    }
    // (a picture laid out before, or while the pointer rested on the box: no Graphviz now)
    this.el.dataset.layoutMs = result.reused ? "0" : String(result.ms);
    this.el.dataset.layoutReused = String(result.reused);
    this.el.dataset.drawnNodes = String(nodeCount);
    this.onMounted(canvas, { anchored: !!anchor });
    if (anchor) canvas.keepNear(anchor.before, anchor.id);
    this.el.dataset.mountMs = (now() - mountStart).toFixed(1);
    this.el.dataset.graph = "ready";
    if (this.el.dataset.toggledAt) {
      // A click on a box or a frame: how long until the new picture was on the page.
      const since = +this.el.dataset.toggledAt;
      delete this.el.dataset.toggledAt;
      afterPaint(() => {
        if (!this.disposed) this.el.dataset.toggleMs = (now() - since).toFixed(1);
        this.saveNow();
      });
    }
    if (!this.painted) {
      this.painted = true;
      afterPaint(() => {
        if (!this.disposed) this.el.dataset.firstPaintMs = (now() - this.t0 - waited).toFixed(1);
      });
    }
  }

  dispose() {
    this.saveNow();
    this.disposed = true;
    clearTimeout(this.restTimer);
    this.token++;
  }
}

/** Zoom buttons for a canvas. */
export function zoomControls(canvas) {
  const button = (how, text, label) =>
    h("button", { type: "button", class: "mg-zoom", "data-action": `zoom-${how}`, "aria-label": label, title: label, text, onclick: () => canvas.zoom(how) });
  return h("span", { class: "mg-zooms" }, button("out", "−", "zoom out"), button("fit", "fit", "the whole graph in the box (labels stay readable: a bigger graph scrolls)"), button("in", "+", "zoom in"));
}
