// A live stepper's trace grows by "append" messages: one step's events and frames, the blocks
// met in them, the arenas. The index grows in place by exactly those (extendIndex), and must
// then equal the index of the whole trace so far, built from nothing.
export function liveMessages(t, cut) {
  const allocAt = new Map();
  t.events.forEach((ev, i) => {
    if (ev.type === "alloc" && !allocAt.has(ev.block)) allocAt.set(ev.block, i);
  });
  const blocksUpTo = (last) => t.blocks.filter((b) => (allocAt.has(b.id) ? allocAt.get(b.id) : -1) <= last);
  const prefix = (k) => ({
    ...t,
    events: t.events.slice(0, t.frames[k] + 1),
    frames: t.frames.slice(0, k + 1),
    blocks: blocksUpTo(t.frames[k]),
  });
  const messages = [];
  for (let k = cut + 1; k < t.frames.length; k++) {
    const first = t.frames[k - 1] + 1;
    const last = t.frames[k];
    messages.push({
      events: t.events.slice(first, last + 1),
      frames: [last],
      blocks: t.blocks.filter((b) => allocAt.has(b.id) && allocAt.get(b.id) >= first && allocAt.get(b.id) <= last),
      arenas: t.arenas || [],
    });
  }
  return { prefix, messages };
}
