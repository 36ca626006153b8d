// Rows of a fixed height in a scrolling pane, of which only those on screen (and a margin) exist
// in the DOM: a tape of 10,000 slots costs what 60 rows cost to draw and to restyle.
import { h } from "./dom.js";

const MARGIN = 12; // rows kept beyond each edge of the visible window

export class VirtualRows {
  /**
   * pane: the scrolling element; count: how many rows; rowHeight: px (the CSS must agree);
   * make(i): a new element for row i; paint(i, el): bring row i's element up to date.
   */
  constructor({ pane, count, rowHeight, make, paint, className = "" }) {
    this.pane = pane;
    this.count = count;
    this.rowHeight = rowHeight;
    this.make = make;
    this.paint = paint;
    this.rendered = new Map(); // row index -> element
    this.keep = null; // a row kept in the DOM even out of view: the list's Tab stop
    this.body = h("div", { class: `mg-vbody ${className}`, style: { position: "relative", height: `${count * rowHeight}px` } });
    this.queued = false;
    this.onScroll = () => {
      if (this.queued) return;
      this.queued = true;
      requestAnimationFrame(() => {
        this.queued = false;
        this.render();
      });
    };
    pane.addEventListener("scroll", this.onScroll);
  }

  /** Create the rows now in view, drop the others. */
  render() {
    const visible = Math.ceil((this.pane.clientHeight || 480) / this.rowHeight);
    const first = Math.max(0, Math.floor(this.pane.scrollTop / this.rowHeight) - MARGIN);
    const last = Math.min(this.count - 1, first + visible + 2 * MARGIN);
    const kept = this.keep !== null && this.keep >= 0 && this.keep < this.count ? this.keep : null;
    for (const [i, el] of this.rendered) {
      if ((i < first || i > last) && i !== kept) {
        el.remove();
        this.rendered.delete(i);
      }
    }
    const wanted = [];
    for (let i = first; i <= last; i++) wanted.push(i);
    if (kept !== null && (kept < first || kept > last)) wanted.push(kept);
    for (const i of wanted) {
      if (this.rendered.has(i)) continue;
      const el = this.make(i);
      el.style.position = "absolute";
      el.style.top = `${i * this.rowHeight}px`;
      el.style.left = "0";
      el.style.right = "0";
      this.paint(i, el);
      this.body.append(el);
      this.rendered.set(i, el);
    }
  }

  /** Repaint every row that exists. */
  repaint() {
    for (const [i, el] of this.rendered) this.paint(i, el);
  }

  /** Scroll the pane (never the page) so that row i is in view, then render. */
  reveal(i, offset = 0) {
    const top = i * this.rowHeight + offset;
    const view = this.pane.clientHeight || 0;
    if (top < this.pane.scrollTop + offset || top + this.rowHeight > this.pane.scrollTop + view) {
      this.pane.scrollTop = Math.max(0, top - view / 3);
    }
    this.render();
  }

  dispose() {
    this.pane.removeEventListener("scroll", this.onScroll);
  }
}
