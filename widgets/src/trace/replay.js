// Replaying a minigrad trace (docs/trace.md).
//
// The state shown at frame k is a pure fold of events[0 .. frames[k]]: `stateAt(trace, k)` builds
// it from nothing every time. The views step with a `Replayer`, which applies only the new
// events when moving forward and folds again from the start when moving back; both use the
// same `applyEvent`, and the tests check that they always agree.

/** The phase a reader sees: forward, recompute (a checkpoint rebuilding its segment during
 * backward), backward, or released (the graph and scope were freed). */
const PHASE_OF = { forward: "forward", recompute: "recompute", backward: "backward", release: "released" };

/**
 * Look-up tables for one trace: one pass over nodes, edges, blocks and events. A live stepper
 * gains events, frames and blocks with every step; `extendIndex` adds just those, so that a
 * step's page work is what the step added, not the whole trace again.
 */
export function indexTrace(trace) {
  const nodes = new Map();
  const opIds = [];
  const varIds = [];
  for (const node of trace.nodes || []) {
    nodes.set(node.id, node);
    (node.type === "op" ? opIds : varIds).push(node.id);
  }
  const index = {
    trace,
    nodes,
    opIds,
    varIds,
    edges: trace.edges || [],
    blocks: new Map(),
    arenas: new Map(),
    events: trace.events || [], // (the trace's own lists: a live view appends to them)
    frames: trace.frames || [],
    // Blocks with no "alloc" event were there before recording began (parameters on a
    // permanent arena, say): they are alive from the first frame on.
    allocated: new Set(),
    preexisting: [],
    // The byte range each arena's strip must cover, so that blocks never move while replaying.
    extent: new Map(),
    framePhase: [], // the phase of each frame: the phase of the state after its last event
  };
  extendIndex(index, { events: index.events, frames: index.frames, blocks: trace.blocks || [], arenas: trace.arenas || [] });
  return index;
}

/**
 * Add what a trace gained to its index, in place: the new events and frames (already appended
 * to the trace's lists, which the index shares), the new blocks, and the arenas (a few small
 * records, sent whole). Returns what it touched ({entries}: one per event, frame, block and
 * arena read), whether the blocks alive before the first event changed (a Replayer then folds
 * from the start again) and whether the memory strip's blocks, arenas or extents changed.
 */
export function extendIndex(index, { events = [], frames = [], blocks = [], arenas = [] }) {
  let entries = 0;
  let preexistingChanged = false;
  let stripChanged = blocks.length > 0; // (the memory strip draws every block, on its arena's extent)
  const widen = (arena, end) => {
    const before = index.extent.get(arena) || 0;
    if (end > before || !index.extent.has(arena)) {
      index.extent.set(arena, end);
      stripChanged = true;
    }
  };
  for (const ev of events) {
    entries++;
    if (ev.type === "alloc" && !index.allocated.has(ev.block)) {
      index.allocated.add(ev.block);
      const at = index.blocks.has(ev.block) ? index.preexisting.indexOf(ev.block) : -1;
      if (at >= 0) {
        // (a block thought there from the start is allocated after all: rare)
        index.preexisting.splice(at, 1);
        preexistingChanged = true;
      }
    }
    if (ev.arena != null && typeof ev.high_water === "number") widen(ev.arena, Math.max(ev.high_water, ev.used || 0));
  }
  for (const block of blocks) {
    entries++;
    const known = index.blocks.has(block.id);
    index.blocks.set(block.id, block);
    widen(block.arena, block.offset + block.nbytes);
    if (!known && !index.allocated.has(block.id)) {
      index.preexisting.push(block.id);
      preexistingChanged = true;
    }
  }
  for (const arena of arenas) {
    entries++;
    const before = index.arenas.get(arena.id);
    if (!before || before.name !== arena.name || before.type !== arena.type || before.capacity !== arena.capacity) stripChanged = true;
    index.arenas.set(arena.id, arena);
  }
  for (const e of frames) {
    entries++;
    index.framePhase.push(PHASE_OF[index.events[e]?.phase] || "forward");
  }
  return { entries, preexistingChanged, stripChanged };
}

function asIndex(traceOrIndex) {
  return traceOrIndex && traceOrIndex.framePhase ? traceOrIndex : indexTrace(traceOrIndex);
}

/** The state before any event. */
export function initialState(index) {
  const blocks = new Map();
  for (const id of index.preexisting) blocks.set(id, "alive");
  return {
    frame: -1,
    event: -1,
    phase: "forward",
    current: null, // the node the last step was about (the op of an "apply" event)
    exists: new Set(), // nodes created so far (forward)
    pending: new Map(), // op id -> pending count
    applied: new Set(), // ops whose backward ran
    ready: [], // ops that are ready and have not run yet, in the order they became ready
    grads: new Map(), // variable id -> {values, first, writes, seed, by}
    gradOutput: new Map(), // op id -> the grad_output its backward received (first values)
    backwardStarted: false,
    done: false, // "done": every node ran; only leaf gradients are kept
    consumed: false, // "consume": saved tensors freed
    blocks, // block id -> "alive" | "freed" | "popped" (absent: not allocated yet)
    arenas: new Map(), // arena id -> {used, high_water} from its latest event
  };
}

function setArena(state, ev) {
  if (ev.arena != null) state.arenas.set(ev.arena, { used: ev.used, high_water: ev.high_water });
}

/** Apply one event to a state, in place. */
export function applyEvent(state, ev) {
  const phase = PHASE_OF[ev.phase];
  if (phase) state.phase = phase;
  switch (ev.type) {
    case "leaf":
      state.exists.add(ev.node);
      state.current = ev.node;
      break;
    case "op":
      if (state.done) {
        // A new forward pass after a finished backward (a record() of several steps).
        state.done = false;
        state.consumed = false;
        state.backwardStarted = false;
      }
      state.exists.add(ev.node);
      if (ev.output) state.exists.add(ev.output);
      if (!state.pending.has(ev.node)) state.pending.set(ev.node, 0);
      for (const p of ev.pending || []) state.pending.set(p.node, p.count);
      state.current = ev.node;
      break;
    case "alloc":
      state.blocks.set(ev.block, "alive");
      setArena(state, ev);
      break;
    case "free":
      state.blocks.set(ev.block, "freed");
      setArena(state, ev);
      break;
    case "pop":
      for (const id of ev.blocks || []) state.blocks.set(id, "popped");
      setArena(state, ev);
      state.current = null;
      break;
    case "start":
      state.backwardStarted = true;
      state.grads.set(ev.variable, { values: ev.grad || [], first: true, writes: 1, seed: true, by: ev.node });
      if (ev.node && !state.applied.has(ev.node) && !state.ready.includes(ev.node)) state.ready.push(ev.node);
      state.current = ev.variable;
      break;
    case "apply": {
      state.applied.add(ev.node);
      const at = state.ready.indexOf(ev.node);
      if (at >= 0) state.ready.splice(at, 1);
      state.gradOutput.set(ev.node, ev.grad || []);
      state.current = ev.node;
      break;
    }
    case "accumulate": {
      const before = state.grads.get(ev.variable);
      state.grads.set(ev.variable, {
        values: ev.grad || [],
        first: !!ev.first_write,
        writes: (before ? before.writes : 0) + 1,
        seed: false,
        by: ev.node,
      });
      break;
    }
    case "pending":
      state.pending.set(ev.node, ev.count);
      break;
    case "ready":
      if (!state.applied.has(ev.node) && !state.ready.includes(ev.node)) state.ready.push(ev.node);
      break;
    case "done":
      state.done = true;
      state.current = null;
      break;
    case "consume":
      state.consumed = true;
      state.current = null;
      break;
    default:
      break; // unknown event types are ignored: a newer writer may add some
  }
  return state;
}

/**
 * The nodes whose own state (exists, pending, applied, ready, gradient) an event changes, added
 * to `into`: what a step has to restyle besides the current node. Keep it beside applyEvent:
 * a new event type changes both (test/replay.test.js checks one against the other). The
 * state-wide flags (done, consumed, backwardStarted) are not per node: a painter compares them.
 */
export function eventNodes(ev, into = new Set()) {
  switch (ev.type) {
    case "leaf":
    case "apply":
    case "pending":
    case "ready":
      into.add(ev.node);
      break;
    case "op":
      into.add(ev.node);
      if (ev.output) into.add(ev.output);
      for (const p of ev.pending || []) into.add(p.node);
      break;
    case "start":
      into.add(ev.variable);
      if (ev.node) into.add(ev.node);
      break;
    case "accumulate":
      into.add(ev.variable);
      break;
    default:
      break; // (memory events, done, consume: no node's own state)
  }
  return into;
}

/** The state after events[0 .. lastEvent], built from nothing. */
export function foldEvents(traceOrIndex, lastEvent) {
  const index = asIndex(traceOrIndex);
  const state = initialState(index);
  const end = Math.min(lastEvent, index.events.length - 1);
  for (let i = 0; i <= end; i++) applyEvent(state, index.events[i]);
  state.event = end;
  return state;
}

/** Clamp a frame number into the trace's frames (-1 when there are none). */
export function clampFrame(index, k) {
  const n = index.frames.length;
  if (n === 0) return -1;
  if (!Number.isFinite(k)) return n - 1;
  return Math.max(0, Math.min(n - 1, Math.trunc(k)));
}

/** The state shown at frame k: a pure fold of events 0..frames[k]. */
export function stateAt(traceOrIndex, k) {
  const index = asIndex(traceOrIndex);
  const frame = clampFrame(index, k);
  const state = frame < 0 ? initialState(index) : foldEvents(index, index.frames[frame]);
  state.frame = frame;
  return state;
}

/** [first, last] event indices of frame k. */
export function frameRange(index, k) {
  if (k < 0 || k >= index.frames.length) return [0, -1];
  const first = k === 0 ? 0 : index.frames[k - 1] + 1;
  return [first, index.frames[k]];
}

/** The events of frame k (what the step's sentence is made of). */
export function frameEvents(index, k) {
  const [first, last] = frameRange(index, k);
  return index.events.slice(first, last + 1);
}

/**
 * Where "forward" (jump to the end of the current phase) goes from frame k: the last frame of
 * the run of frames that share k's phase, or, from the end of a run, the end of the next run.
 * Returns k itself at the last frame.
 */
export function phaseEndAfter(index, k) {
  const phases = index.framePhase;
  const n = phases.length;
  if (n === 0) return -1;
  k = clampFrame(index, k);
  let j = k;
  while (j + 1 < n && phases[j + 1] === phases[k]) j++;
  if (j > k) return j;
  if (k + 1 >= n) return k;
  j = k + 1;
  while (j + 1 < n && phases[j + 1] === phases[k + 1]) j++;
  return j;
}

/**
 * Keeps one mutable state and moves it between frames: forward by applying the new events,
 * back by folding again from the start. seek(k) always equals stateAt(trace, k).
 */
export class Replayer {
  constructor(index) {
    this.reset(index);
  }

  reset(index) {
    this.index = index;
    this.state = initialState(index);
  }

  /** Keep the state but use a longer trace (events appended; extendIndex says whether the
   * blocks alive from the start changed: then the next seek folds from the start). */
  extend(index, { preexistingChanged = false } = {}) {
    this.index = index;
    if (preexistingChanged) this.state = initialState(index);
  }

  seek(k) {
    const index = this.index;
    const frame = clampFrame(index, k);
    const target = frame < 0 ? -1 : index.frames[frame];
    if (target < this.state.event) this.state = initialState(index);
    for (let i = this.state.event + 1; i <= target; i++) applyEvent(this.state, index.events[i]);
    this.state.event = Math.max(this.state.event, target);
    this.state.frame = frame;
    return this.state;
  }
}

/** A plain, sorted copy of a state (for tests and debugging). */
export function snapshot(state) {
  const sortedEntries = (m) => [...m.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  return {
    frame: state.frame,
    event: state.event,
    phase: state.phase,
    current: state.current,
    exists: [...state.exists].sort(),
    pending: sortedEntries(state.pending),
    applied: [...state.applied].sort(),
    ready: [...state.ready],
    grads: sortedEntries(state.grads),
    gradOutput: sortedEntries(state.gradOutput),
    backwardStarted: state.backwardStarted,
    done: state.done,
    consumed: state.consumed,
    blocks: sortedEntries(state.blocks),
    arenas: sortedEntries(state.arenas),
  };
}
