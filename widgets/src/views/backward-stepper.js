// BackwardStepper: step through forward and backward one frame at a time (anywidget AFM).
//
// The picture is laid out once per DOT; a step folds the trace to the new frame (trace/replay.js) and
// restyles only what the step changed (ui/paint.js, ui/memory-charts.js). `frame` is synced both ways; past the last
// recorded frame, while `live`, the kernel is asked to run the real engine ("advance",
// "finish") and answers with an "append" message.
import { h, setText } from "../ui/dom.js";
import { injectStyles } from "../ui/inject-styles.js";
import { indexTrace, extendIndex, Replayer, clampFrame, frameEvents, phaseEndAfter } from "../trace/replay.js";
import { legend } from "../ui/legend.js";
import { renderInspector, renderScope } from "../ui/inspector.js";
import { StepPainter } from "../ui/paint.js";
import { MemoryStrip } from "../ui/memory-charts.js";
import { FoldedDrawing, GraphPane, copyTrace, readOptions, now, zoomControls } from "./common.js";
import { BOX, boxProgress, indexFolding } from "../trace/scope-boxes.js";
import { Player } from "../ui/player.js";
import { traceStepText } from "../trace/step-numbers.js";

const PHASE_HINT = {
  forward: "forward: the graph is being recorded; no gradients yet",
  recompute: "recompute: a checkpoint runs its segment again from the saved inputs, recording it this time",
  backward: "backward: gradients flow from the loss back to the leaves",
  released: "released: the graph was consumed; parameters keep their gradients",
};

class Stepper extends Player {
  constructor({ model, el, host }) {
    super();
    this.t0 = now();
    this.model = model;
    this.el = el;
    injectStyles(el);
    this.trace = copyTrace(model.get("trace"));
    this.index = indexTrace(this.trace);
    this.drawing = new FoldedDrawing(model);
    this.fold = indexFolding(this.drawing.now().folding);
    this.replayer = new Replayer(this.index);
    this.options = readOptions(model, this.trace);
    this.shown = -2;
    this.state = null;
    this.hovered = null;
    this.pinned = null;
    this.wanted = null; // a frame the kernel set before its events arrived
    this.painter = null;

    this.pane = new GraphPane({
      model,
      host,
      el,
      t0: this.t0,
      drawing: this.drawing,
      badges: true,
      gradTags: true,
      onInspect: (id, how) => {
        if (how === "click") this.pinned = id && id !== this.pinned ? id : null;
        else this.hovered = id;
        this.inspect();
      },
      onMounted: (canvas, { anchored }) => {
        this.painter = new StepPainter(canvas, this.index, this.fold);
        if (this.state) this.painter.paint(this.state, this.touched(this.shown));
        if (!anchored) this.reveal(); // (after a click the clicked scope stays where it was)
      },
    });
    this.build();
    this.memory.build(this.index);
    this.applyOptions();
    this.show(model.get("frame"), { echo: false, force: true });
    this.listen();
    this.redraw();
  }

  // -- construction --------------------------------------------------------------------------
  build() {
    this.buildTransport({ extra: { forward: ["end of phase ▶▶", "jump to the end of this phase"] } });
    this.counter = h("span", { class: "mg-counter", "aria-live": "off" });
    this.phase = h("span", { class: "mg-phase" });
    this.phaseHint = h("span", { class: "mg-phase-hint mg-muted" });
    this.order = h("span", { class: "mg-order mg-muted" });
    this.live = h("span", { class: "mg-live", hidden: true, text: "live" });
    this.status = h("span", { class: "mg-status", role: "status" });
    this.title = h("div", { class: "mg-title" });
    this.sentence = h("ol", { class: "mg-sentence", "aria-live": "polite" });
    this.queue = h("div", { class: "mg-queue" });
    this.inspector = h("div", { class: "mg-inspector", "aria-live": "polite" });
    this.memory = new MemoryStrip();

    const controls = h(
      "div",
      { class: "mg-controls", role: "toolbar", "aria-label": "stepping" },
      this.buttons.first,
      this.buttons.back,
      this.buttons.step,
      this.buttons.forward,
      this.buttons.last,
      this.buttons.play,
      this.speed,
      this.slider,
      this.counter,
    );
    this.root = h(
      "div",
      { class: "mg-root mg-stepper", tabindex: "0", "data-lm-suppress-shortcuts": "true", "aria-label": "backward stepper" },
      h("div", { class: "mg-header" }, this.title, h("span", { class: "mg-phasebox" }, this.phase, this.phaseHint), this.order, this.live, zoomControls(this.pane.canvas)),
      controls,
      h("div", { class: "mg-stepbox" }, this.sentence, this.status),
      h(
        "div",
        { class: "mg-body" },
        this.pane.canvas.el,
        h("div", { class: "mg-side" }, this.queue, this.inspector, legend({ stepper: true })),
      ),
      this.memory.el,
    );
    this.root.addEventListener("keydown", (e) => this.key(e));
    this.el.replaceChildren(this.root);
  }

  listen() {
    const m = this.model;
    m.on("change:frame", () => {
      this.settle();
      const k = m.get("frame");
      if (typeof k === "number" && k > this.index.frames.length - 1) this.wanted = k;
      this.show(k, { echo: false });
      this.continuePlaying();
    });
    m.on("change:dot", () => this.redraw());
    m.on("change:expanded", () => this.redraw());
    m.on("change:scope_table", () => this.redraw());
    m.on("change:message", () => this.redraw());
    m.on("change:options", () => this.applyOptions());
    m.on("change:live", () => this.update());
    m.on("change:trace", () => this.replaceTrace());
    m.on("msg:custom", (content) => this.message(content));
    // Live steps arrive as "append" messages, not as a new `trace`: a view drawn later (a page
    // reload, the same stepper shown twice) says how much it has, and the kernel sends the
    // whole trace only if it is behind.
    if (m.get("live")) m.send({ kind: "hello", frames: this.trace.frames.length });
  }

  redraw() {
    const { dot, folding } = this.drawing.now();
    this.fold = indexFolding(folding);
    this.pane.show({ dot, message: this.model.get("message"), index: this.index, nodeCount: this.fold.visible || null, folded: this.fold.boxes.size > 0 });
  }

  applyOptions() {
    this.options = readOptions(this.model, this.trace);
    this.title.textContent = this.options.title;
    this.title.hidden = !this.options.title;
    this.root.classList.toggle("mg-hide-saved", !this.options.showSaved);
    this.order.textContent = this.options.order === "topo" ? "order: topological sort" : "order: pending counts";
    this.inspect();
  }

  // -- the trace -----------------------------------------------------------------------------
  reindex() {
    this.index = indexTrace(this.trace);
    if (this.painter) this.painter.bind(this.index);
    this.memory.build(this.index);
  }

  replaceTrace() {
    const incoming = this.model.get("trace") || {};
    // The kernel re-sends the whole trace after an "append" that already brought its events:
    // nothing to redo then.
    const t = this.trace;
    const len = (list) => (Array.isArray(list) ? list.length : -1);
    if (
      len(incoming.events) === t.events.length &&
      len(incoming.frames) === t.frames.length &&
      len(incoming.nodes) === t.nodes.length &&
      len(incoming.blocks) === t.blocks.length &&
      len(incoming.edges) === t.edges.length
    ) {
      this.trace = { ...copyTrace(incoming), events: t.events, frames: t.frames };
      this.index.trace = this.trace;
      this.options = readOptions(this.model, this.trace);
      return;
    }
    this.trace = copyTrace(incoming);
    this.reindex();
    this.replayer.reset(this.index);
    this.options = readOptions(this.model, this.trace);
    this.show(this.model.get("frame"), { echo: false, force: true });
  }

  message(content) {
    if (!content || content.kind !== "append") return;
    const t = this.trace;
    const list = (x) => (Array.isArray(x) ? x : []);
    const added = { events: list(content.events), frames: list(content.frames), blocks: list(content.new_blocks), arenas: list(content.arenas) };
    t.events.push(...added.events);
    t.frames.push(...added.frames);
    t.blocks.push(...added.blocks); // (only the new ones travel)
    if (Array.isArray(content.arenas)) t.arenas = content.arenas;
    if (Array.isArray(content.blocks)) {
      // (a whole block list: an older kernel) index everything again
      t.blocks = content.blocks;
      this.reindex();
      this.replayer.extend(this.index, { preexistingChanged: true });
    } else {
      // A step's page work is what it added: the index grows in place (the painter and the
      // strip hold the same index; the nodes and edges do not change after forward).
      const { entries, preexistingChanged, stripChanged } = extendIndex(this.index, added);
      this.el.dataset.indexedEntries = String(entries);
      this.replayer.extend(this.index, { preexistingChanged });
      if (stripChanged) this.memory.grow(this.index, added.blocks); // (new blocks only)
    }
    this.settle();
    const k = this.wanted !== null ? this.wanted : this.shown;
    this.wanted = null;
    this.show(k, { echo: false, force: true });
    this.continuePlaying();
  }

  // -- moving --------------------------------------------------------------------------------
  get last() {
    return this.index.frames.length - 1;
  }

  get isLive() {
    return !!this.model.get("live");
  }

  act(action) {
    if (action !== "forward") return super.act(action);
    this.pause();
    const target = phaseEndAfter(this.index, this.shown);
    this.go(target);
    if (target === this.last && this.isLive && this.state && this.state.phase !== "released") this.ask("finish");
  }

  askText(kind) {
    return kind === "finish" ? "running the rest in the kernel…" : "running one step in the kernel…";
  }

  // -- showing a frame -----------------------------------------------------------------------
  touched(k) {
    const set = new Set();
    for (const ev of frameEvents(this.index, k)) if (ev.type === "accumulate" || ev.type === "start") set.add(ev.variable);
    return set;
  }

  show(k, { echo = false, force = false } = {}) {
    const t = now();
    const frame = clampFrame(this.index, typeof k === "number" ? k : this.trace.initial_frame ?? 0);
    if (frame === this.shown && !force) return;
    this.shown = frame;
    this.state = this.replayer.seek(frame);
    // (a step forward restyles what its events changed; a jump, everything: ui/paint.js)
    if (this.painter) {
      this.painter.update(this.state, this.touched(frame));
      const v = this.painter.visits;
      this.el.dataset.paintVisits = v.full ? "all" : String(v.nodes + v.boxes + v.edges);
    }
    this.memory.update(this.state);
    this.update();
    this.el.dataset.lastStepMs = (now() - t).toFixed(2);
    this.el.dataset.frame = String(frame);
    if (echo && this.model.get("frame") !== frame) {
      // frame_seq counts the moves; requests to the kernel carry it (see ask), so the kernel
      // can tell a move held back until after its answer from a new one.
      this.model.set("frame_seq", (this.model.get("frame_seq") || 0) + 1);
      this.model.set("frame", frame);
      this.model.save_changes();
    }
    if (typeof requestAnimationFrame === "function") requestAnimationFrame(() => this.reveal());
  }

  reveal() {
    if (this.hovered || !this.state || !this.state.current || !this.pane.mounted) return;
    // The current node, or the box it is drawn in.
    const current = this.state.current;
    this.pane.canvas.reveal(this.fold.boxOf.get(current) || current);
  }

  /** Everything around the picture: phase, sentence, queue, counter, buttons, inspector. */
  update() {
    const state = this.state;
    const n = this.index.frames.length;
    const frame = this.shown;
    const live = this.isLive;
    this.live.hidden = !live;
    if (!state || n === 0) {
      setText(this.counter, "no steps recorded");
      setText(this.phase, "");
      this.sentence.replaceChildren();
      for (const b of Object.values(this.buttons)) b.disabled = true;
      return;
    }
    setText(this.counter, traceStepText(frame, this.trace.initial_frame, n - 1, live));
    setText(this.phase, state.phase);
    this.phase.dataset.phase = state.phase;
    setText(this.phaseHint, PHASE_HINT[state.phase] || "");
    this.slider.max = String(Math.max(0, n - 1));
    if (this.slider.value !== String(frame)) this.slider.value = String(frame);

    const events = frameEvents(this.index, frame);
    const key = `${frame}:${events.length}`;
    if (this.sentenceKey !== key) {
      this.sentenceKey = key;
      this.sentence.replaceChildren(...events.map((ev) => h("li", { class: `mg-ev mg-ev-${ev.type}`, text: ev.text || ev.type })));
    }

    const queueKey = state.ready.join(",");
    if (this.queueKey !== queueKey) {
      this.queueKey = queueKey;
      const items = state.ready.map((id) => {
        const node = this.index.nodes.get(id);
        return h("button", { type: "button", class: "mg-link", "data-node": id, text: node ? node.label : id, onclick: () => this.pick(id) });
      });
      this.queue.replaceChildren(
        h("span", { class: "mg-queue-label", text: "ready queue: " }),
        ...(items.length ? items : [h("span", { class: "mg-muted", text: state.backwardStarted && !state.done ? "empty" : "—" })]),
      );
    }

    const busy = !!this.awaiting;
    this.buttons.first.disabled = frame <= 0;
    this.buttons.back.disabled = frame <= 0;
    this.buttons.step.disabled = busy || (frame >= n - 1 && !live);
    this.buttons.forward.disabled = busy || (frame >= n - 1 && !live);
    this.buttons.last.disabled = busy || (frame >= n - 1 && !live);
    this.inspect();
  }

  pick(id) {
    this.pinned = id;
    this.inspect();
  }

  inspect() {
    if (!this.state) return;
    const id = this.hovered || this.pinned || this.state.current;
    if (id && id.startsWith(BOX) && this.fold.boxes.has(id)) {
      const box = this.fold.boxes.get(id);
      // (the painter's running counts when they are of this state: no walk over the members)
      const p = this.painter;
      const counted = p && p.fold === this.fold && p.painted && p.painted.state === this.state && p.painted.event === this.state.event;
      const progress = counted ? p.tally.progress(id, this.state) : boxProgress(box, this.state, this.index);
      renderScope(this.inspector, { box, state: this.state, index: this.index, progress, onPick: (picked) => this.pick(picked) });
      return;
    }
    const inBox = id && this.fold.boxOf.get(id);
    const why =
      id === null
        ? ""
        : id === this.hovered && id !== this.pinned
          ? "under the pointer or the keyboard focus"
          : id === this.pinned
            ? "pinned: click it again to unpin"
            : inBox
              ? `this step, inside the closed scope ${inBox.slice(BOX.length)}`
              : "this step";
    renderInspector(this.inspector, {
      index: this.index,
      id,
      state: this.state,
      showValues: this.options.showValues,
      why,
      onPick: (picked) => this.pick(picked),
    });
  }

  dispose() {
    this.disposePlayer();
    this.pane.dispose();
  }
}

export function renderStepper({ model, el, host }) {
  const stepper = new Stepper({ model, el, host });
  return () => stepper.dispose();
}

export default { render: renderStepper };
