// Opening and closing scopes in the page, without the kernel: for any list of open scopes,
// the same DOT and box table Python writes (minigrad/widgets/dot.py `to_dot`, collapse.py
// `boxes`), made from what Python sends once: the trace, its `scope_table` (each node's scope
// path, each scope's op count, border ops and content signature) and `dot_style` (the DOT's
// fixed parts). tests/test_refold.py checks that both sides write the same text.
import { BOX, FRAME } from "./scopes.js";

// graphviz (Python) quoting: a DOT ID stays bare; anything else is quoted, its unescaped
// quotes escaped; "<...>" passes as an HTML string. (Python's "$" also matches before a
// final newline.)
const ID = /^(?:[a-zA-Z_][a-zA-Z0-9_]*|-?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?))\n?$/;
const HTML = /^<[\s\S]*>\n?$/;
const KEYWORDS = new Set(["node", "edge", "graph", "digraph", "subgraph", "strict"]);

// plain: user text (a label), never read as an HTML-like label (Python's graphviz.escape).
export function quote(text, plain = false) {
  text = String(text);
  if (!plain && HTML.test(text)) return text;
  if (!ID.test(text) || KEYWORDS.has(text.toLowerCase())) return `"${text.replace(/((?:\\\\)*)\\?"/g, '$1\\"')}"`;
  return text;
}

/** "label=... a=... b=..." (the other attributes sorted by name, as graphviz writes them). */
function attrList(label, attrs) {
  const parts = label === null ? [] : [`label=${quote(label, true)}`];
  for (const key of Object.keys(attrs).sort()) parts.push(`${quote(key)}=${quote(attrs[key], key === "label" || key === "id")}`);
  return ` [${parts.join(" ")}]`;
}

/**
 * User text as Graphviz must read it to give it back as written (dot.py `_text`): backslashes
 * doubled (labels and ids are escStrings) and "&" as "&amp;" (Graphviz decodes entities).
 */
function userText(t) {
  return String(t).replace(/\\/g, "\\\\").replace(/&/g, "&amp;");
}

/** A multi-line label: user text escaped, "\n" between parts (dot.py `_label`). */
function label(...parts) {
  return parts.filter((p) => p).map(userText).join("\\n");
}

/**
 * Tables for refold(), built once per trace: each node's path (scope numbers, outermost
 * first), each scope's members in creation order and the scope around it, and the leaves.
 * null when the graph has no scopes.
 */
export function prepareScopes(trace, table, style) {
  if (!table || !Array.isArray(table.scopes) || !table.scopes.length || !style || !style.head) return null;
  const nodes = (trace && trace.nodes) || [];
  if (!Array.isArray(table.path_of) || table.path_of.length !== nodes.length) return null;
  const number = new Map(table.scopes.map((scope, k) => [scope, k]));
  const members = table.scopes.map(() => []);
  const pathOf = new Map();
  nodes.forEach((node, k) => {
    const path = table.paths[table.path_of[k]] || [];
    pathOf.set(node.id, path);
    for (const s of path) members[s].push(node.id);
  });
  const parent = new Array(table.scopes.length).fill(-1);
  for (const path of table.paths) {
    path.forEach((s, d) => {
      parent[s] = d ? path[d - 1] : -1;
    });
  }
  const leaves = new Set(nodes.filter((n) => n.type === "variable" && (n.op === null || n.op === undefined)).map((n) => n.id));
  return { trace, table, style, number, members, pathOf, parent, leaves };
}

/**
 * What is drawn with the scopes in `expanded` open (unknown names are ignored, and a scope
 * inside a closed one stays hidden): {dot, folding: {boxes, frames, visible}}, exactly as
 * Python's Folding writes its `dot` and `folding` traits.
 */
export function refold(kit, expanded) {
  const { trace, table, style, number, members, pathOf, parent } = kit;
  const open = new Set();
  for (const name of expanded || []) if (number.has(name)) open.add(number.get(name));
  // A scope is drawn open (as a frame) when it and every scope around it are open.
  const shown = new Set();
  for (const path of table.paths) {
    for (const s of path) {
      if (!open.has(s)) break;
      shown.add(s);
    }
  }
  const where = new Map(); // node id -> its DOT name: itself or its box's
  const found = new Map(); // scope number -> box record, in the order of their first member
  const body = new Map([[-1, []]]); // container (-1: the top) -> its node and box lines
  for (const s of shown) body.set(s, []);
  let nodesDrawn = 0;
  for (const node of trace.nodes) {
    const path = pathOf.get(node.id);
    const closed = path.find((s) => !open.has(s));
    if (closed !== undefined) {
      where.set(node.id, `box${closed}`);
      if (!found.has(closed)) found.set(closed, { scope: table.scopes[closed], members: members[closed], ops: table.ops[closed], border: table.border[closed] });
      continue;
    }
    where.set(node.id, node.id);
    nodesDrawn++;
    let text, css, attrs;
    if (node.type === "variable") {
      attrs = style.node[node.role];
      const dims = node.shape || []; // (a vector is written "(3,)": "3" would read as a value, dot.py `_shape`)
      text = label(node.label, dims.length === 1 ? `(${dims[0]},)` : dims.map(String).join("x") || "scalar");
      css = `var ${node.role}`;
    } else [attrs, text, css] = [style.node.op, label(node.label), "op"];
    const container = path.length ? path[path.length - 1] : -1;
    body.get(container).push(`\t${quote(node.id)}${attrList(text, { id: node.id, class: css, ...attrs })}\n`);
  }
  // Boxes of one kind: equal signatures among the boxes drawn, lettered in order. The boxes
  // of one frame form one Graphviz group (dot.py `box_group`).
  const alike = new Map();
  for (const s of found.keys()) alike.set(table.signature[s], (alike.get(table.signature[s]) || 0) + 1);
  const letters = new Map();
  const boxes = {};
  for (const [s, box] of found) {
    const count = alike.get(table.signature[s]);
    if (count > 1 && !letters.has(table.signature[s])) letters.set(table.signature[s], String.fromCharCode(65 + (letters.size % 26)));
    box.kind = letters.has(table.signature[s]) ? letters.get(table.signature[s]) : null;
    box.alike = count;
    boxes[BOX + box.scope] = box;
    const kind = box.kind ? `kind ${box.kind} (x${count})` : "";
    const text = label(box.scope, `${box.members.length} nodes, ${box.ops} ops`, kind);
    body.get(parent[s]).push(`\t${quote(`box${s}`)}${attrList(text, { id: userText(BOX + box.scope), class: "scope", group: parent[s] < 0 ? "boxes" : `boxes in ${table.scopes[parent[s]]}`, ...style.node.scope })}\n`);
  }
  // Frames inside the frame around them, in scope order (as Python attaches them).
  const children = new Map();
  for (const s of [...shown].sort((a, b) => a - b)) {
    if (!children.has(parent[s])) children.set(parent[s], []);
    children.get(parent[s]).push(s);
  }
  const frameLines = (s) => {
    const lines = [`subgraph ${quote(`cluster_${s}`)} {\n`, `\tgraph${attrList(null, { label: label(table.scopes[s]), id: userText(FRAME + table.scopes[s]), ...style.frame })}\n`];
    for (const line of body.get(s)) lines.push(line);
    for (const child of children.get(s) || []) for (const line of frameLines(child)) lines.push(`\t${line}`);
    lines.push("}\n");
    return lines;
  };
  const out = [style.head, ...body.get(-1)];
  for (const s of children.get(-1) || []) for (const line of frameLines(s)) out.push(`\t${line}`);
  const drawn = new Set();
  const edges = [];
  trace.edges.forEach((edge, index) => {
    if (edge.kind === "saved" && !style.show_saved) return;
    const source = where.get(edge.source);
    const target = where.get(edge.target);
    if (source === edge.source && target === edge.target) {
      edges.push([source, target, { id: `e${index}`, class: edge.kind, ...style.edge[edge.kind] }]);
    } else if (source !== target && edge.kind !== "saved" && !drawn.has(`${source} ${target}`)) {
      drawn.add(`${source} ${target}`); // one edge per pair of boxes (or box and node)
      edges.push([source, target, { id: `b${index}`, class: "parent scope-edge", ...style.edge.parent }]);
    }
  });
  // A leaf feeding more than two boxes: no weight on those edges (dot.py says why).
  const fan = new Map();
  for (const [source, , attrs] of edges) {
    if (attrs.class === "parent scope-edge" && kit.leaves.has(source)) fan.set(source, (fan.get(source) || 0) + 1);
  }
  for (const [source, target, attrs] of edges) {
    if ((fan.get(source) || 0) > 2 && attrs.class === "parent scope-edge") attrs.weight = "0";
    out.push(`\t${quote(source)} -> ${quote(target)}${attrList(null, attrs)}\n`);
  }
  out.push("}\n");
  const frames = [...shown].map((s) => FRAME + table.scopes[s]).sort();
  return { dot: out.join(""), folding: { boxes, frames, visible: nodesDrawn + found.size } };
}
