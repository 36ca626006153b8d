// MemoryView: the arena strip at one step, and bytes used over the whole trace (anywidget AFM).
import { h, setText } from "../ui/dom.js";
import { injectStyles } from "../ui/inject-styles.js";
import { indexTrace, Replayer, clampFrame, frameEvents } from "../trace/replay.js";
import { MemoryStrip, MemoryTimeline, MemoryCompare } from "../ui/memory-charts.js";
import { copyTrace, readOptions, now, afterPaint } from "./common.js";
import { traceStepShort, traceStepText } from "../trace/step-numbers.js";

/** The frame where the arenas together use the most bytes (by their events). */
export function peakFrame(index) {
  const used = new Map();
  let best = -1;
  let bestEvent = -1;
  index.events.forEach((ev, i) => {
    if (ev.arena == null || typeof ev.used !== "number") return;
    used.set(ev.arena, ev.used);
    let total = 0;
    for (const v of used.values()) total += v;
    if (total > best) {
      best = total;
      bestEvent = i;
    }
  });
  if (bestEvent < 0) return index.frames.length - 1;
  const k = index.frames.findIndex((f) => f >= bestEvent);
  return k < 0 ? index.frames.length - 1 : k;
}

/** MemoryView.compare(...): the runs named in options.compare on one axis, nothing else. */
function renderCompare({ model, el, t0 }) {
  const title = h("div", { class: "mg-title" });
  const chart = new MemoryCompare();
  el.replaceChildren(h("div", { class: "mg-root mg-memoryview mg-memorycompare" }, h("div", { class: "mg-header" }, title), chart.el));
  function draw() {
    const o = model.get("options") || {};
    const runs = Array.isArray(o.compare) ? o.compare : [];
    title.textContent = typeof o.title === "string" ? o.title : "";
    title.hidden = !title.textContent;
    chart.build(runs);
    el.dataset.runs = String(runs.length);
  }
  draw();
  el.dataset.engineWaitMs = "0";
  afterPaint(() => (el.dataset.firstPaintMs = (now() - t0).toFixed(1)));
  model.on("change:options", draw);
  return () => {};
}

export function renderMemoryView({ model, el }) {
  const t0 = now();
  injectStyles(el);
  if (Array.isArray((model.get("options") || {}).compare)) return renderCompare({ model, el, t0 });
  let trace = copyTrace(model.get("trace"));
  let index = indexTrace(trace);
  let replayer = new Replayer(index);
  let shown = -1;
  let peak = peakFrame(index);

  const title = h("div", { class: "mg-title" });
  const strip = new MemoryStrip();
  const timeline = new MemoryTimeline({ onPick: (k) => show(k), frameName: (k) => traceStepShort(k, trace.initial_frame, index.frames.length - 1) });
  const slider = h("input", { type: "range", class: "mg-slider", min: "0", max: "0", step: "1", value: "0", "aria-label": "step" });
  const counter = h("span", { class: "mg-counter" });
  const phase = h("span", { class: "mg-phase" });
  const sentence = h("ol", { class: "mg-sentence" });
  slider.addEventListener("input", () => show(+slider.value));
  const root = h(
    "div",
    { class: "mg-root mg-memoryview" },
    h("div", { class: "mg-header" }, title, phase),
    timeline.el,
    h("div", { class: "mg-controls" }, slider, counter),
    h("div", { class: "mg-stepbox" }, sentence),
    strip.el,
  );
  el.replaceChildren(root);

  function show(k) {
    const t = now();
    const frame = clampFrame(index, k);
    shown = frame;
    const state = replayer.seek(frame);
    strip.update(state); // (a step forward: only the blocks it changed)
    timeline.setFrame(frame);
    slider.max = String(Math.max(0, index.frames.length - 1));
    slider.value = String(Math.max(0, frame));
    // (numbered as a BackwardStepper of the same trace numbers it; the view opens at the peak)
    const at = traceStepText(frame, trace.initial_frame, index.frames.length - 1);
    setText(counter, index.frames.length ? (frame === peak ? `${at} (the peak: most bytes in use)` : at) : "no steps recorded");
    setText(phase, state.phase);
    phase.dataset.phase = state.phase;
    sentence.replaceChildren(...frameEvents(index, frame).map((ev) => h("li", { class: `mg-ev mg-ev-${ev.type}`, text: ev.text || ev.type })));
    el.dataset.lastStepMs = (now() - t).toFixed(2);
    el.dataset.frame = String(frame);
  }

  function rebuild() {
    index = indexTrace(trace);
    replayer = new Replayer(index);
    peak = peakFrame(index);
    const o = readOptions(model, trace);
    title.textContent = o.title;
    title.hidden = !o.title;
    strip.build(index);
    timeline.build(index);
  }

  rebuild();
  show(peak);
  el.dataset.engineWaitMs = "0";
  afterPaint(() => (el.dataset.firstPaintMs = (now() - t0).toFixed(1)));

  model.on("change:trace", () => {
    trace = copyTrace(model.get("trace"));
    rebuild();
    show(shown);
  });
  model.on("change:options", () => {
    const o = readOptions(model, trace);
    title.textContent = o.title;
    title.hidden = !o.title;
  });
  model.on("msg:custom", (content) => {
    if (!content || content.kind !== "append") return;
    if (Array.isArray(content.events)) trace.events.push(...content.events);
    if (Array.isArray(content.frames)) trace.frames.push(...content.frames);
    if (Array.isArray(content.blocks)) trace.blocks = content.blocks;
    if (Array.isArray(content.arenas)) trace.arenas = content.arenas;
    rebuild();
    show(index.frames.length - 1);
  });
  return () => {};
}

export default { render: renderMemoryView };
