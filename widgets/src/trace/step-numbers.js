// One step numbering for every stepping view, and for the lessons that name a step.
//
// Step 0 is the state before anything ran; step k is the state after k steps. So `view.frame = 3`
// (AotView, TapeView) shows "step 3", and in a BackwardStepper "step 4" is the state after the
// fourth `stepper.step()`: step 1 is the seed, each later step one node's backward. A stepper's
// frames before backward (forward replayed, op by op, as it was recorded) are counted apart, as
// "forward", so they never shift the backward numbers.

/** "step k of n"; while the kernel can still run more, "step k of n+" (the end is not known). */
export function stepText(k, total, live = false) {
  return `step ${k} of ${total}${live ? "+" : ""}`;
}

/** A trace frame as the counter names it: `initial` is the frame where forward ended (backward's
 * step 0), `last` the last frame recorded so far. */
export function traceStepText(frame, initial, last, live = false) {
  const start = Math.max(0, Math.min(initial || 0, last));
  if (frame < start) return `forward: ${frame + 1} of ${start + 1} recorded`;
  return stepText(frame - start, last - start, live);
}

/** The same name, short, for a chart's axis and marks: "forward 3" or "step 2". */
export function traceStepShort(frame, initial, last) {
  const start = Math.max(0, Math.min(initial || 0, last));
  return frame < start ? `forward ${frame + 1}` : `step ${frame - start}`;
}
