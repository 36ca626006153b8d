// The state of a slot tape at one frame of TapeView's document (minigrad/tape/document.py):
// frame 0 is the slot table after forward; frame k has the first k deltas folded in.
// No DOM here, so that Node tests it (test/tape-replay.test.js).
export class TapeState {
  constructor(doc) {
    this.doc = doc;
    this.reset();
  }

  reset() {
    const slots = this.doc.slots;
    this.frame = 0;
    this.grads = [...slots.grads];
    this.uses = [...slots.uses];
    this.freed = new Uint8Array(slots.kinds.length);
    this.done = new Set(); // positions of instructions already run
  }

  /** Fold forward or start again, to stand at frame k (0 = after forward). */
  seek(k) {
    if (k < this.frame) this.reset();
    const frames = this.doc.frames;
    while (this.frame < k) {
      const f = frames[this.frame];
      for (const [slot, grad] of f.grads) this.grads[slot] = grad;
      for (const [slot, count] of f.uses) this.uses[slot] = count;
      for (const slot of f.freed) this.freed[slot] = 1;
      if (f.position !== null) this.done.add(f.position);
      this.frame++;
    }
  }

  /** What frame k changed (its delta), or null for frame 0. */
  delta(k) {
    return k > 0 ? this.doc.frames[k - 1] : null;
  }
}
