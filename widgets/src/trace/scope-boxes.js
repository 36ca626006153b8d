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

const NOTHING = { exists: 0, run: 0, ready: 0, pending: 0 };
const listed = (map, key, value) => (map.has(key) ? map.get(key).push(value) : map.set(key, [value]));

/**
 * Every box's progress kept one node at a time, so that a step costs what it changed, not the
 * size of its boxes. Each node adds its share to the counts of the boxes it is in (exists, run,
 * ready) and of the boxes it borders (pending); touch(id) moves one node's share. After
 * recount(state), and after touch(id, state) for every node a step changed, progress(boxId,
 * state) equals boxProgress(box, state, index), the plain loop above (test/paint.test.js
 * compares them after every step of real traces).
 */
export class BoxTally {
  constructor(boxes, index) {
    this.boxes = boxes; // box id -> box (indexFolding().boxes)
    this.index = index;
    this.inside = new Map(); // node id -> the boxes it is a member of
    this.across = new Map(); // op id -> the boxes whose border it is on
    for (const [boxId, box] of boxes) {
      for (const id of box.members) listed(this.inside, id, boxId);
      for (const id of box.border) listed(this.across, id, boxId);
    }
    this.counts = new Map();
    this.shares = new Map(); // node id -> its share counted now
  }

  /** What node id adds to its boxes' counts in this state (as boxProgress counts it); ready:
   * the ready ops as a Set (a full count) or a look-up in state.ready (a step's few nodes). */
  share(id, state, ready) {
    const node = this.index.nodes.get(id);
    const applied = state.applied.has(id);
    const op = !!node && node.type === "op";
    const count = state.pending.get(id);
    return {
      exists: state.exists.has(id) ? 1 : 0,
      run: op && applied ? 1 : 0,
      ready: op && !applied && ready.has(id) ? 1 : 0,
      pending: applied ? 0 : count === undefined ? (node || {}).pending_count || 0 : count,
    };
  }

  /** Count every box from nothing (a jump). */
  recount(state) {
    this.counts = new Map([...this.boxes.keys()].map((id) => [id, { ...NOTHING }]));
    this.shares = new Map();
    const ready = new Set(state.ready);
    for (const id of this.inside.keys()) this.touch(id, state, undefined, ready);
    for (const id of this.across.keys()) if (!this.inside.has(id)) this.touch(id, state, undefined, ready);
  }

  /** Move node id's share to what it is in this state; returns the boxes it counts in. */
  touch(id, state, changed = new Set(), ready = { has: (op) => state.ready.includes(op) }) {
    const inside = this.inside.get(id);
    const across = this.across.get(id);
    if (!inside && !across) return changed;
    const before = this.shares.get(id) || NOTHING;
    const now = this.share(id, state, ready);
    this.shares.set(id, now);
    for (const boxId of inside || []) {
      const c = this.counts.get(boxId);
      c.exists += now.exists - before.exists;
      c.run += now.run - before.run;
      c.ready += now.ready - before.ready;
      changed.add(boxId);
    }
    for (const boxId of across || []) {
      this.counts.get(boxId).pending += now.pending - before.pending;
      changed.add(boxId);
    }
    return changed;
  }

  progress(boxId, state) {
    const c = this.counts.get(boxId);
    const box = this.boxes.get(boxId);
    const current = (this.inside.get(state.current) || []).includes(boxId);
    return { run: c.run, total: box.ops, exists: c.exists > 0, current, ready: c.ready > 0, pending: c.pending, done: box.ops > 0 && c.run === box.ops };
  }
}
