// What a screen reader and a keyboard need, as pure functions (no DOM): a node's accessible
// name with its state, the node an arrow key moves to, which keys a view's global handler may
// take, and a memory block's description.

/**
 * A graph node's accessible name: what it is, then what the picture shows by colour, dash and
 * badge. base: "op mul"; s: {future, current, ready, done, pending (count or null),
 * grad: null | {first, text}, dropped, fresh}.
 */
export function nodeName(base, s = {}) {
  const parts = [base];
  if (s.future) parts.push("not created yet");
  if (s.current) parts.push("running now");
  if (s.done) parts.push("backward done");
  else if (s.ready) parts.push("ready");
  if (s.pending !== null && s.pending !== undefined && !s.future) {
    parts.push(`${s.pending} pending ${s.pending === 1 ? "gradient" : "gradients"}`);
  }
  if (s.grad) {
    const how = s.grad.first ? "assigned (=)" : "summed (+=)";
    parts.push(`gradient ${how}${s.grad.text ? ` ${s.grad.text}` : ""}`);
    if (s.fresh) parts.push("written this step");
    if (s.dropped) parts.push("dropped after backward");
  }
  return parts.join(", ");
}

/**
 * An AotView node's accessible name: what it is, then what the picture shows of the derivation
 * (faded: not derived yet; ringed: emitted or rule running; greyed: no gradient; outlined:
 * saved). s: {future, current, fresh, noGrad, saved}.
 */
export function derivedName(base, s = {}) {
  const parts = [base];
  if (s.noGrad) parts.push("no gradient needed");
  if (s.future) parts.push("not derived yet");
  if (s.current) parts.push("its backward rule runs in this step");
  if (s.fresh) parts.push("emitted in this step");
  if (s.saved) parts.push("saved for backward");
  return parts.join(", ");
}

// Arrow keys move on the picture (spatially): to the nearest node whose centre lies in that
// direction, an offset across the direction counting twice as much as one along it.
const DIRECTIONS = { ArrowRight: [1, 0], ArrowLeft: [-1, 0], ArrowDown: [0, 1], ArrowUp: [0, -1] };

/** places: Map id -> {x, y} (centres); the id an arrow key moves to from `from`, or null. */
export function nearestInDirection(places, from, key) {
  const dir = DIRECTIONS[key];
  const at = places.get(from);
  if (!dir || !at) return null;
  let best = null;
  let bestCost = Infinity;
  for (const [id, p] of places) {
    if (id === from) continue;
    const dx = p.x - at.x, dy = p.y - at.y;
    const along = dx * dir[0] + dy * dir[1];
    const across = Math.abs(dx * dir[1] - dy * dir[0]);
    if (along <= 0.5 || across > 3 * along + 40) continue; // behind, or far to the side
    const cost = along + 2 * across;
    if (cost < bestCost) {
      bestCost = cost;
      best = id;
    }
  }
  return best;
}

/** Ids in reading order: left to right, then top to bottom (Home and End go to its ends). */
export function readingOrder(places) {
  return [...places].sort(([, a], [, b]) => a.x - b.x || a.y - b.y).map(([id]) => id);
}

const TEXT_INPUTS = /^(text|search|email|url|tel|password|number|date|time|datetime-local|month|week)$/i;

/**
 * May a view-wide keydown handler act on this key, or does the focused element own it?
 * target: the event's target (anything with tagName / getAttribute / type / isContentEditable).
 * A button (or role=button) owns Space and Enter (they press it); text fields, selects and
 * sliders own every key (typing, choosing, their own arrows); other elements own nothing.
 */
export function ownsKey(target, key) {
  if (!target) return false;
  if (target.isContentEditable) return true;
  const tag = (target.tagName || "").toUpperCase();
  if (tag === "TEXTAREA" || tag === "SELECT") return true;
  if (tag === "INPUT") {
    const type = (target.type || "text").toLowerCase();
    if (type === "range" || TEXT_INPUTS.test(type)) return true;
    return key === " " || key === "Spacebar" || key === "Enter"; // checkbox, radio, button
  }
  const role = target.getAttribute ? target.getAttribute("role") : null;
  const pressable = tag === "BUTTON" || tag === "A" || tag === "SUMMARY" || role === "button" || role === "link";
  return pressable && (key === " " || key === "Spacebar" || key === "Enter");
}

/** A memory block's description: kind, owner, size and place, and its state now. */
export function blockName({ kindText, owner, size, offset, state }) {
  const now = { alive: "alive", freed: "freed", popped: "popped with its arena", unallocated: "not allocated yet" }[state] || state;
  return `${kindText} for ${owner}, ${size} at offset ${offset}: ${now}`;
}
