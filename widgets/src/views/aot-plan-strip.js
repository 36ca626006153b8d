// The memory plan of an ahead-of-time graph as a strip of live ranges: one row per tensor, a bar
// from the operation that writes it to the last operation that reads it, over one time axis that
// runs through forward and then backward. The peak is a vertical line.
import { h } from "../ui/dom.js";
import { bytes, middleEllipsis } from "../text/format.js";

const KIND_TEXT = {
  param: "parameter",
  input: "input",
  saved: "saved for backward",
  activation: "activation (freed in forward)",
  grad: "gradient",
  recomputed: "recomputed in backward",
  temp: "temporary (backward)",
};

const NAME_CHARS = 28;

const pct = (x, extent) => `${Math.max(0, Math.min(100, (100 * x) / Math.max(1, extent))).toFixed(3)}%`;

export class PlanStrip {
  constructor({ onPick } = {}) {
    this.el = h("div", { class: "mg-plan", role: "group", "aria-label": "memory plan" });
    this.onPick = onPick || (() => {});
    this.rows = new Map(); // node id -> row element
  }

  build(plan) {
    this.rows = new Map();
    if (!plan || !Array.isArray(plan.ranges) || plan.ranges.length === 0) {
      this.el.replaceChildren(h("div", { class: "mg-muted mg-plan-empty", text: "No memory plan was given (pass plan= to AotView)." }));
      return;
    }
    const timeline = Array.isArray(plan.timeline) ? plan.timeline : [];
    const extent = Math.max(1, timeline.length);
    const split = typeof plan.backward_start === "number" ? plan.backward_start : null;
    const head = h(
      "div",
      { class: "mg-plan-head" },
      h("strong", { text: "memory plan" }),
      h("span", {
        class: "mg-plan-peak",
        text: ` · peak ${bytes(plan.peak_bytes)}${typeof plan.peak_at === "number" && timeline[plan.peak_at] ? ` at ${timeline[plan.peak_at]}` : ""}`,
      }),
      plan.policy ? h("span", { class: "mg-muted", text: ` · policy: ${plan.policy}` }) : null,
      typeof plan.saved_bytes === "number" ? h("span", { class: "mg-muted", text: ` · saved for backward ${bytes(plan.saved_bytes)}` }) : null,
    );
    const kinds = [...new Set(plan.ranges.map((r) => r.kind))];
    const legend = h(
      "ul",
      { class: "mg-kinds", "aria-label": "live range kinds" },
      ...kinds.map((k) => h("li", null, h("span", { class: `mg-kind-swatch mg-range-${k}` }), h("span", { text: KIND_TEXT[k] || k }))),
      h("li", null, h("span", { class: "mg-hw-swatch" }), h("span", { text: "peak" })),
    );
    const marks = [];
    if (split !== null) marks.push(h("div", { class: "mg-plan-split", style: { left: pct(split, extent) }, title: "backward starts" }));
    if (typeof plan.peak_at === "number") marks.push(h("div", { class: "mg-plan-peakline", style: { left: pct(plan.peak_at + 0.5, extent) }, title: "peak" }));
    // The name column is as wide as the longest name, up to NAME_CHARS (longer ones are cut in
    // the middle): a fixed narrow column cut "blocks.0.attn_norm" and "...attn_norm.rstd" alike.
    const longest = Math.min(NAME_CHARS, Math.max(...plan.ranges.map((r) => String(r.tensor).length)));
    this.el.style.setProperty("--mg-plan-name-width", `${Math.ceil(longest * 1.2) + 1}ch`);
    const rows = plan.ranges.map((r) => {
      const bar = h("div", {
        class: `mg-range mg-range-${r.kind}`,
        style: { left: pct(r.start, extent), width: pct(r.end - r.start + 1, extent) },
        title: `${r.tensor}: ${KIND_TEXT[r.kind] || r.kind}, ${bytes(r.nbytes)}, live from ${timeline[r.start] ?? r.start} to ${timeline[r.end] ?? r.end}`,
      });
      const row = h(
        "div",
        { class: "mg-plan-row", "data-range": r.tensor, "data-kind": r.kind, "data-node": r.node || "" },
        h("button", { type: "button", class: "mg-link mg-plan-name", text: middleEllipsis(r.tensor, NAME_CHARS), title: r.tensor, onclick: () => r.node && this.onPick(r.node) }),
        h("span", { class: "mg-plan-bytes mg-muted", text: bytes(r.nbytes) }),
        h("div", { class: "mg-plan-track" }, bar, ...marks.map((m) => m.cloneNode(true))),
      );
      if (r.node) this.rows.set(r.node, row);
      return row;
    });
    const axis = h(
      "div",
      { class: "mg-plan-axis mg-muted" },
      h("span", { text: "forward →" }),
      h("span", { text: split !== null ? `backward from ${timeline[split] ?? split} →` : "" }),
      h("span", { text: `${extent} operations` }),
    );
    this.el.replaceChildren(head, legend, h("div", { class: "mg-plan-rows" }, ...rows), axis);
  }

  /** Mark the row of the node under the pointer (if it has one). */
  highlight(id) {
    for (const [node, row] of this.rows) row.classList.toggle("mg-plan-hot", node === id);
  }
}
