// A DOT writer for tests and the demo page, following the contract of the Python side
// (minigrad/widgets): node ids are trace ids, edge ids e<k>, classes name the roles and kinds.
import { shapeText } from "../src/text/format.js";

export function dotFromTrace(trace, { rankdir = "BT" } = {}) {
  const q = (text) => `"${String(text).replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")}"`;
  const lines = [
    "digraph G {",
    `  rankdir=${rankdir}; nodesep=0.25; ranksep=0.35;`,
    '  node [fontname="Helvetica" fontsize=10 margin="0.06,0.03" height=0.3];',
    "  edge [arrowsize=0.6];",
  ];
  for (const n of trace.nodes) {
    if (n.type === "op") lines.push(`  ${n.id} [id=${q(n.id)} class="op" shape=ellipse label=${q(n.label)}];`);
    else {
      const shape = shapeText(n.shape);
      lines.push(`  ${n.id} [id=${q(n.id)} class=${q(`var ${n.role}`)} shape=box label=${q(`${n.label}\n${shape}`)}];`);
    }
  }
  trace.edges.forEach((e, k) => {
    const extra = e.kind === "saved" ? " style=dashed constraint=false" : "";
    lines.push(`  ${e.source} -> ${e.target} [id="e${k}" class=${q(e.kind)}${extra}];`);
  });
  lines.push("}");
  return lines.join("\n");
}
