// The transport every stepping view shares: first / back / step / last / play, the keyboard, and,
// while a live backward runs in the kernel, asking it for one more step (or the rest).
//
// A view extends Player and provides: `shown` (the frame on screen), `last` (the last frame it
// has), `isLive` (the kernel can make more), `show(k, { echo })`, `update()` (redraw the
// controls), `buttons.play`, `root`, `speed` (the interval input), `status` (a text line) and
// `askText(kind)` (what the status says while the kernel works). Without isLive it is a replay.
import { h, setText } from "./dom.js";
import { ownsKey } from "./a11y.js";

const KERNEL_TIMEOUT_MS = 30000;
const SPEEDS = [
  [1500, "slow"],
  [700, "normal"],
  [300, "fast"],
  [100, "fastest"],
];
const KEYS = { ArrowRight: "step", ArrowLeft: "back", " ": "play", Spacebar: "play", Home: "first", End: "last" };

export class Player {
  constructor() {
    this.playing = false;
    this.timer = null;
    this.awaiting = null; // "advance" | "finish" while the kernel works
    this.awaitTimer = null;
    this.disposed = false;
  }

  // The controls: this.buttons (first, back, step, any extra ones, last, play), this.speed, this.slider.
  buildTransport({ step = "one step (Right arrow)", extra = {} } = {}) {
    const button = (action, text, label) =>
      h("button", { type: "button", "data-action": action, title: label, "aria-label": label, text, onclick: () => this.act(action) });
    this.buttons = {
      first: button("first", "|◀ first", "first step (Home)"),
      back: button("back", "◀ back", "one step back (Left arrow)"),
      step: button("step", "step ▶", step),
      ...Object.fromEntries(Object.entries(extra).map(([action, [text, label]]) => [action, button(action, text, label)])),
      last: button("last", "last ▶|", "last step (End)"),
      play: button("play", "▶ play", "play / pause (Space)"),
    };
    // Asked for less motion: play starts slow and offers no fast speeds.
    const calm = typeof matchMedia === "function" && matchMedia("(prefers-reduced-motion: reduce)").matches;
    const speeds = calm ? SPEEDS.filter(([ms]) => ms >= 700) : SPEEDS;
    const start = calm ? 1500 : 700;
    this.speed = h("select", { class: "mg-speed", "aria-label": "speed", title: "speed" }, ...speeds.map(([ms, text]) => h("option", { value: String(ms), text, selected: ms === start })));
    this.slider = h("input", { type: "range", class: "mg-slider", min: "0", max: "0", step: "1", value: "0", "aria-label": "step" });
    this.slider.addEventListener("input", () => this.go(+this.slider.value));
  }

  go(k) {
    this.show(k, { echo: true });
  }

  act(action) {
    if (action === "play") {
      if (this.playing) this.pause();
      else this.play();
      return;
    }
    this.pause();
    if (action === "first") this.go(0);
    else if (action === "back") this.go(this.shown - 1);
    else if (action === "step") this.stepOnce();
    else if (action === "last") {
      this.go(this.last);
      if (this.isLive) this.ask("finish");
    }
  }

  // One frame on; at the last frame of a live run, the kernel makes the next one.
  stepOnce() {
    if (this.shown < this.last) {
      this.go(this.shown + 1);
      return true;
    }
    if (this.isLive) this.ask("advance");
    return false;
  }

  ask(kind) {
    if (this.awaiting) return;
    this.awaiting = kind;
    setText(this.status, this.askText(kind));
    const seq = this.model.get("frame_seq") || 0;
    this.model.send(kind === "finish" ? { kind, seq } : { kind, steps: 1, seq });
    clearTimeout(this.awaitTimer);
    this.awaitTimer = setTimeout(() => {
      this.awaiting = null;
      setText(this.status, "the kernel did not answer (is it busy, or was it restarted?)");
      this.pause();
      this.update();
    }, KERNEL_TIMEOUT_MS);
    this.update();
  }

  // The kernel answered (or failed): stop waiting.
  settle() {
    if (!this.awaiting) return;
    this.awaiting = null;
    clearTimeout(this.awaitTimer);
    setText(this.status, "");
    this.update();
  }

  play() {
    if (this.shown >= this.last && !this.isLive) this.go(0);
    this.playing = true;
    this.buttons.play.textContent = "❚❚ pause";
    this.root.classList.add("mg-playing");
    this.tick();
  }

  pause() {
    this.playing = false;
    clearTimeout(this.timer);
    this.timer = null;
    this.buttons.play.textContent = "▶ play";
    this.root.classList.remove("mg-playing");
  }

  tick() {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      if (!this.playing || this.disposed) return;
      if (this.shown < this.last) {
        this.go(this.shown + 1);
        this.tick();
      } else if (this.isLive) {
        if (!this.awaiting) this.ask("advance"); // continuePlaying() resumes on the answer
      } else this.pause();
    }, +this.speed.value || 700);
  }

  continuePlaying() {
    if (this.playing && !this.awaiting) this.tick();
  }

  key(e) {
    // A focused button keeps Space and Enter, a slider or field its keys; a graph node or a
    // memory block handled its own (defaultPrevented).
    if (e.defaultPrevented || e.altKey || e.ctrlKey || e.metaKey || ownsKey(e.target, e.key)) return;
    const action = KEYS[e.key];
    if (!action) return;
    e.preventDefault();
    e.stopPropagation();
    this.act(action);
  }

  disposePlayer() {
    this.disposed = true;
    this.pause();
    clearTimeout(this.awaitTimer);
  }
}
