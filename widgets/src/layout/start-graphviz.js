// Starts the layout engine: the Graphviz backend (graphviz-worker.js, embedded here as text by
// build.mjs) in a Web Worker made from a blob URL, or, if this page cannot start workers, on the
// page itself through a dynamic import of the same blob. Layouts run one at a time; one that
// takes longer than its time limit is stopped by terminating the worker (a fresh one starts for
// the next request), so a huge graph can never freeze the page.
import ENGINE_SOURCE from "minigrad:graphviz-worker-source";

export const LAYOUT_TIMEOUT_MS = 20000;
const BOOT_TIMEOUT_MS = 30000;
// Without a worker, Graphviz blocks the page while it works: refuse what could take seconds.
const MAX_NODES_ON_PAGE = 350;

export class LayoutTimeout extends Error {
  constructor(message) {
    super(message);
    this.name = "LayoutTimeout";
  }
}

class WorkerEngine {
  constructor(url) {
    this.url = url;
    this.worker = null;
    this.seq = 0;
    this.queue = [];
    this.running = null;
  }

  request(message, timeoutMs) {
    return new Promise((resolve, reject) => {
      this.queue.push({ message, timeoutMs, resolve, reject });
      this.pump();
    });
  }

  pump() {
    if (this.running || this.queue.length === 0) return;
    const job = this.queue.shift();
    try {
      if (!this.worker) {
        const worker = new Worker(this.url);
        worker.onmessage = (e) => this.answer(e.data);
        worker.onerror = (e) => {
          if (e && e.preventDefault) e.preventDefault();
          this.stop(new Error(`the layout worker failed${e && e.message ? ": " + e.message : ""}`));
        };
        this.worker = worker;
      }
      job.id = ++this.seq;
      this.running = job;
      job.timer = setTimeout(
        () => this.stop(new LayoutTimeout(`Graphviz did not finish within ${Math.round(job.timeoutMs / 1000)} s`)),
        job.timeoutMs,
      );
      this.worker.postMessage({ id: job.id, ...job.message });
    } catch (error) {
      this.running = null;
      job.reject(error);
      this.pump();
    }
  }

  answer(data) {
    const job = this.running;
    if (!job || !data || data.id !== job.id) return;
    clearTimeout(job.timer);
    this.running = null;
    if (data.ok) job.resolve(data);
    else job.reject(new Error(data.error));
    this.pump();
  }

  /** Terminate the worker (it may be stuck in a layout) and fail the running request. */
  stop(error) {
    if (this.worker) this.worker.terminate();
    this.worker = null;
    const job = this.running;
    this.running = null;
    if (job) {
      clearTimeout(job.timer);
      job.reject(error);
    }
    this.pump();
  }
}

function engineUrl() {
  return URL.createObjectURL(new Blob([ENGINE_SOURCE], { type: "text/javascript" }));
}

async function startInWorker(url, bootTimeoutMs) {
  const worker = new WorkerEngine(url);
  const info = await worker.request({ type: "ready" }, bootTimeoutMs);
  return {
    mode: "worker",
    graphvizVersion: info.graphvizVersion,
    layout(dot, options = {}) {
      return worker.request(
        { type: "layout", dot, options: { graphAttributes: options.graphAttributes || {} } },
        options.timeoutMs || LAYOUT_TIMEOUT_MS,
      );
    },
  };
}

async function startOnPage(url) {
  if (!globalThis.__minigrad_viz_backend) await import(/* webpackIgnore: true */ url);
  const backend = globalThis.__minigrad_viz_backend;
  if (!backend) throw new Error("the Graphviz backend did not load");
  const info = await backend.ready();
  return {
    mode: "page",
    graphvizVersion: info.graphvizVersion,
    async layout(dot, options = {}) {
      if ((options.nodeCount || 0) > MAX_NODES_ON_PAGE) {
        throw new Error(
          `This browser did not let minigrad start a Web Worker, and laying out ${options.nodeCount} nodes ` +
            `on the page itself could freeze it for seconds.`,
        );
      }
      return backend.layout(dot, options);
    },
  };
}

/**
 * Start an engine: {mode: "worker" | "page" | "failed", graphvizVersion, layout(dot, options)}.
 * layout() resolves to {svg, ms} (SVG text) and rejects with the reason; options are
 * {graphAttributes, timeoutMs, nodeCount}. Never rejects itself: a failure is mode "failed".
 */
export async function startGraphviz({ useWorker = true, bootTimeoutMs = BOOT_TIMEOUT_MS } = {}) {
  const t0 = Date.now();
  let url;
  try {
    url = engineUrl();
  } catch (error) {
    return failed(error);
  }
  let workerError = null;
  if (useWorker && typeof Worker !== "undefined") {
    try {
      const engine = await startInWorker(url, bootTimeoutMs);
      engine.startMs = Date.now() - t0;
      return engine;
    } catch (error) {
      workerError = error;
      if (typeof console !== "undefined") console.warn("[minigrad] no layout worker, laying out on the page:", error);
    }
  }
  try {
    const engine = await startOnPage(url);
    engine.startMs = Date.now() - t0;
    engine.workerError = workerError ? String(workerError.message || workerError) : null;
    return engine;
  } catch (error) {
    return failed(error);
  }
}

function failed(error) {
  const text = String((error && error.message) || error);
  return {
    mode: "failed",
    error: text,
    graphvizVersion: null,
    layout() {
      return Promise.reject(new Error(`the Graphviz layout engine could not start: ${text}`));
    },
  };
}
