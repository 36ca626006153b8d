// The legend: what the shapes, colours and line styles mean.
import { h, s } from "./dom.js";

function swatch(kind) {
  const svg = s("svg", { width: "30", height: "16", viewBox: "0 0 30 16", "aria-hidden": "true" });
  switch (kind) {
    case "op":
      svg.append(s("ellipse", { class: "mg-sw mg-sw-op", cx: "15", cy: "8", rx: "12", ry: "6.5" }));
      break;
    case "parent":
    case "saved":
    case "again":
      svg.append(s("line", { class: `mg-sw mg-sw-${kind}`, x1: "2", y1: "8", x2: "28", y2: "8" }));
      break;
    case "current":
    case "done":
    case "ready":
      svg.append(s("ellipse", { class: `mg-sw mg-sw-op mg-sw-${kind}`, cx: "15", cy: "8", rx: "12", ry: "6.5" }));
      break;
    case "badge":
      svg.append(s("circle", { class: "mg-sw mg-sw-badge", cx: "15", cy: "8", r: "7" }));
      svg.append(s("text", { class: "mg-sw-badge-text", x: "15", y: "11", "text-anchor": "middle", text: "2" }));
      break;
    case "grad-first":
    case "grad-sum":
      svg.append(s("rect", { class: `mg-sw mg-sw-${kind}`, x: "2", y: "2", width: "26", height: "12", rx: "3" }));
      svg.append(s("text", { class: "mg-sw-tag-text", x: "15", y: "11", "text-anchor": "middle", text: kind === "grad-sum" ? "+=" : "=" }));
      break;
    default:
      svg.append(s("rect", { class: `mg-sw mg-sw-${kind}`, x: "3", y: "2", width: "24", height: "12", rx: "1" }));
  }
  return svg;
}

const BASE = [
  ["data", "data (no gradient)"],
  ["param", "parameter"],
  ["intermediate", "intermediate"],
  ["output", "output (loss)"],
  ["op", "op"],
  ["parent", "parent edge (input)"],
  ["saved", "saved tensor"],
  ["again", "same array, read again by a recompute"], // (shown only when drawn: styles.css)
];

const STEPPER = [
  ["current", "running now"],
  ["ready", "ready"],
  ["done", "backward ran"],
  ["badge", "pending count"],
  ["grad-first", "gradient: first write"],
  ["grad-sum", "gradient: summed"],
];

export function legend({ stepper = false } = {}) {
  const items = stepper ? [...BASE, ...STEPPER] : BASE;
  return h(
    "ul",
    { class: "mg-legend", "aria-label": "legend" },
    ...items.map(([kind, text]) => h("li", { "data-legend": kind }, swatch(kind), h("span", { text }))),
  );
}
