// Closed scopes drawn as boxes (the `folding` trait, built in Python by widgets/collapse.py):
// what each box stands for, and its progress while backward runs.

/** Box ids start with this; frames (open scopes, Graphviz clusters) with FRAME. */
export const BOX = "s:";
export const FRAME = "c:";

/**
 * Look-up tables for the folding trait: boxes (box id -> {scope, members, ops, border, kind,
 * alike}) and boxOf (node id -> the box it is drawn in; absent when drawn as itself).
 */
export function indexFolding(folding) {
  const boxes = new Map(Object.entries((folding && folding.boxes) || {}));
  const boxOf = new Map();
  for (const [id, box] of boxes) for (const member of box.members) boxOf.set(member, id);
  const frames = new Set((folding && folding.frames) || []);
  return { boxes, boxOf, frames, visible: (folding && folding.visible) || 0 };
}

/**
 * A box's progress in a replay state: ops run / ops inside, whether the current node or a
 * ready op is inside, whether any member exists yet, and the pending counts of its border ops
 * (the gradients still to come in from outside the box).
 */
export function boxProgress(box, state, index) {
  let run = 0;
  let exists = false;
  let current = false;
  const ready = new Set(state.ready);
  let anyReady = false;
  for (const id of box.members) {
    if (state.exists.has(id)) exists = true;
    if (id === state.current) current = true;
    const node = index.nodes.get(id);
    if (!node || node.type !== "op") continue;
    if (state.applied.has(id)) run++;
    else if (ready.has(id)) anyReady = true;
  }
  let pending = 0;
  for (const id of box.border) {
    if (state.applied.has(id)) continue;
    const count = state.pending.get(id);
    pending += count === undefined ? (index.nodes.get(id) || {}).pending_count || 0 : count;
  }
  return { run, total: box.ops, exists, current, ready: anyReady, pending, done: box.ops > 0 && run === box.ops };
}

/** The words under a box: "run 3/50 · 2 pending in". */
export function progressText(progress, backwardStarted) {
  if (!backwardStarted) return "";
  const head = `run ${progress.run}/${progress.total}`;
  return progress.pending > 0 && !progress.done ? `${head} · ${progress.pending} pending in` : head;
}

/** What clicking does to the open scopes: a box opens its scope, a frame closes its own. */
export function toggled(expanded, id) {
  const list = Array.isArray(expanded) ? expanded : [];
  if (id.startsWith(BOX)) {
    const scope = id.slice(BOX.length);
    return list.includes(scope) ? list : [...list, scope].sort();
  }
  if (id.startsWith(FRAME)) {
    const scope = id.slice(FRAME.length);
    return list.filter((s) => s !== scope);
  }
  return list;
}
