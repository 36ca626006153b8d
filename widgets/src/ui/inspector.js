// What the inspector says about one node: values, gradients, parents vs saved tensors.
import { h } from "./dom.js";
import { values, shapeText, shapeInParens, bytes } from "../text/format.js";

const relationsCache = new WeakMap();

/**
 * consumers (parent edges out of a variable), savers (saved edges out of it) and copies (a
 * checkpoint's recompute reading it again: "again" edges out of it), by variable; originals:
 * what a recompute's leaf reads again.
 */
function relations(index) {
  let rel = relationsCache.get(index);
  if (!rel) {
    const consumers = new Map();
    const savers = new Map();
    const copies = new Map();
    const originals = new Map();
    for (const e of index.edges) {
      if (e.kind === "again") originals.set(e.target, [e.source]);
      const map = e.kind === "parent" ? consumers : e.kind === "saved" ? savers : e.kind === "again" ? copies : null;
      if (!map) continue;
      if (!map.has(e.source)) map.set(e.source, []);
      map.get(e.source).push(e.target);
    }
    rel = { consumers, savers, copies, originals };
    relationsCache.set(index, rel);
  }
  return rel;
}

const ROLE = { param: "parameter", data: "data", intermediate: "intermediate", output: "output" };

function labelOf(index, id) {
  const node = index.nodes.get(id);
  return node ? node.label : id;
}

function row(list, term, ...content) {
  list.append(h("dt", { text: term }), h("dd", null, ...content));
}

function nodeList(index, ids, onPick) {
  if (!ids || ids.length === 0) return h("span", { class: "mg-muted", text: "none" });
  const seen = new Set();
  const ul = h("ul", { class: "mg-nodelist" });
  for (const id of ids) {
    if (seen.has(id)) continue;
    seen.add(id);
    const node = index.nodes.get(id);
    const text = node ? (node.type === "op" ? node.label : `${node.label} ${shapeInParens(node.shape)}`) : id;
    ul.append(h("li", null, pickButton(id, text, onPick)));
  }
  return ul;
}

function pickButton(id, text, onPick) {
  if (!onPick) return h("span", { text });
  return h("button", { type: "button", class: "mg-link", "data-node": id, text, onclick: () => onPick(id) });
}

function gradText(state, node) {
  if (!state) return null;
  if (node.role === "data") return h("span", { class: "mg-muted", text: "none: data never gets a gradient" });
  const g = state.grads.get(node.id);
  if (!g) {
    if (!state.backwardStarted) return h("span", { class: "mg-muted", text: "not yet: backward has not run" });
    return h("span", { class: "mg-muted", text: "nothing has arrived yet" });
  }
  const how = g.seed
    ? "seed: d loss / d loss = 1"
    : g.first
      ? "first write (assigned)"
      : `sum: ${g.writes > 1 ? `${g.writes} writes` : "added to what was there"}`;
  const parts = [h("code", { text: values(g.values, node.size) }), h("span", { class: g.first ? "mg-tag-first" : "mg-tag-sum", text: ` ${how}` })];
  if (state.done && node.role !== "param") {
    parts.push(h("div", { class: "mg-muted", text: "freed when backward finished: only leaf gradients are kept" }));
  }
  return h("span", null, ...parts);
}

/**
 * Fill `container` with what there is to say about node `id`. state: the replay state (the
 * stepper) or null (the static graph). onPick(id): inspect another node.
 */
export function renderInspector(container, { index, id, state = null, showValues = true, why = "", onPick = null }) {
  const node = id ? index.nodes.get(id) : null;
  if (!node) {
    container.replaceChildren(
      h("div", { class: "mg-muted mg-inspector-empty", text: "Point at a node (or focus it with Tab) to see its values, gradient, parents and saved tensors." }),
    );
    return;
  }
  const exists = !state || state.exists.has(id);
  const kind = node.type === "op" ? "op" : ROLE[node.role] || "variable";
  const head = h(
    "div",
    { class: "mg-inspector-head" },
    h("span", { class: `mg-kind mg-kind-${node.type === "op" ? "op" : node.role}`, text: kind }),
    h("strong", { class: "mg-inspector-label", text: node.label }),
    h("span", { class: "mg-muted", title: "its id in the trace (v…: a variable, f…: an op); names in the code may repeat, ids do not", text: ` id ${node.id}${why ? ` · ${why}` : ""}` }),
  );
  const dl = h("dl");
  const rel = relations(index);

  if (node.type === "op") {
    row(dl, "formula", h("span", { text: node.formula || node.name }));
    row(dl, "parents", nodeList(index, node.inputs, onPick));
    const saved = node.saved || [];
    if (saved.length === 0) row(dl, "saved", h("span", { class: "mg-muted", text: "nothing" }));
    else {
      const ul = h("ul", { class: "mg-nodelist mg-saved-list" });
      for (const item of saved) {
        const from = item.source
          ? pickButton(item.source, labelOf(index, item.source), onPick)
          : h("span", { class: "mg-muted", text: "made by the op to keep" });
        ul.append(h("li", null, h("span", { text: `${item.what} ← ` }), from));
      }
      row(dl, "saved", ul);
    }
    const gradLines = node.grad_text || [];
    if (gradLines.length) {
      const ul = h("ul", { class: "mg-nodelist" });
      gradLines.forEach((text, slot) => {
        const target = node.inputs && node.inputs[slot];
        ul.append(h("li", null, h("span", { text: `${target ? labelOf(index, target) : `input ${slot}`}: ${text}` })));
      });
      row(dl, "backward", ul);
    }
    if (state) {
      let status;
      if (!exists) status = "not created yet";
      else if (state.applied.has(id)) status = "backward has run";
      else if (state.ready.includes(id)) status = "ready: waiting in the queue";
      else if (state.backwardStarted) status = "waiting for gradients";
      else status = "recorded";
      row(dl, "status", h("span", { text: status }));
      if (exists) row(dl, "pending", h("span", { text: String(state.pending.get(id) ?? node.pending_count) }));
      const go = state.gradOutput.get(id);
      if (go) row(dl, "grad_output", h("code", { text: values(go) }));
    } else {
      row(dl, "pending", h("span", { text: `${node.pending_count} when forward ended` }));
    }
    const ctx = node.ctx && Object.keys(node.ctx).length ? JSON.stringify(node.ctx) : "";
    if (ctx) row(dl, "ctx", h("code", { text: ctx.length > 160 ? ctx.slice(0, 157) + "…" : ctx }));
  } else {
    row(dl, "shape", h("span", { text: `${shapeText(node.shape)} ${node.dtype}` }));
    if (showValues) row(dl, "value", exists ? h("code", { text: values(node.value, node.size) }) : h("span", { class: "mg-muted", text: "not computed yet" }));
    const g = gradText(state, node);
    if (g) row(dl, "grad", g);
    if (node.op) row(dl, "made by", nodeList(index, [node.op], onPick));
    row(dl, "parent of", nodeList(index, rel.consumers.get(id), onPick));
    const savers = rel.savers.get(id);
    if (savers && savers.length) row(dl, "saved by", nodeList(index, savers, onPick));
    // (one array, two nodes: the recompute's graph is new, so it starts from new leaves)
    if (rel.originals.has(id)) row(dl, "same array as", nodeList(index, rel.originals.get(id), onPick), h("div", { class: "mg-muted", text: "read again by the checkpoint's recompute" }));
    if (rel.copies.has(id)) row(dl, "read again as", nodeList(index, rel.copies.get(id), onPick), h("div", { class: "mg-muted", text: "by a checkpoint's recompute, in backward" }));
  }
  if (node.block) {
    const block = index.blocks.get(node.block);
    if (block) {
      const arena = index.arenas.get(block.arena);
      row(dl, "memory", h("span", { text: `${node.block}: ${block.kind}, ${bytes(block.nbytes)} on ${arena ? arena.name : block.arena}` }));
    }
  }
  container.replaceChildren(head, dl);
}

/**
 * What there is to say about a closed scope's box: its size, its kind, its progress in the
 * replay state (the stepper) and the ops at its border, whose pending counts wait for gradients
 * from outside. onPick(id): inspect one of them.
 */
export function renderScope(container, { box, state = null, index, onPick = null, progress = null }) {
  const head = h(
    "div",
    { class: "mg-inspector-head" },
    h("span", { class: "mg-kind mg-kind-scope", text: "scope" }),
    h("strong", { class: "mg-inspector-label", text: box.scope }),
    h("span", { class: "mg-muted", text: " · closed: click the box to open it" }),
  );
  const dl = h("dl");
  row(dl, "size", h("span", { text: `${box.members.length} nodes, ${box.ops} ops` }));
  if (box.kind) row(dl, "kind", h("span", { text: `kind ${box.kind}: ${box.alike} boxes hold the same ops` }));
  if (state && progress) {
    row(dl, "backward", h("span", { text: state.backwardStarted ? `${progress.run} of ${progress.total} ops run` : "not started" }));
    if (progress.current) row(dl, "this step", nodeList(index, [state.current], onPick));
  }
  row(dl, "border ops", nodeList(index, box.border, onPick));
  container.replaceChildren(head, dl);
}
