// The Graphviz side of the layout engine, bundled with @viz-js/viz into one classic script
// (build.mjs embeds it as a string). It runs either as a Web Worker, so that a slow layout never
// freezes the page, or, where workers are not allowed, on the page itself, where it installs
// globalThis.__minigrad_viz_backend. It never touches the DOM: it turns DOT into SVG text.
import { instance, graphvizVersion } from "@viz-js/viz";
// build.mjs swaps the WebAssembly that @viz-js/viz inlines for a gzipped copy; unpack it first.
import { prepareWasm } from "minigrad:wasm";

let vizPromise = null;

function warmupDot(n) {
  const lines = ["digraph{rankdir=BT;node[shape=box fontsize=10];w;x;"];
  let prev = "x";
  for (let i = 0; i < n; i++) {
    lines.push(`m${i}[shape=ellipse];v${i};${prev}->m${i};w->m${i};w->m${i}[style=dashed constraint=false];m${i}->v${i};`);
    prev = `v${i}`;
  }
  lines.push("}");
  return lines.join("");
}

function viz() {
  if (!vizPromise) {
    vizPromise = prepareWasm().then(instance).then((v) => {
      // The first layouts of a fresh WebAssembly instance run on baseline-compiled code;
      // warm Graphviz up on a small graph shaped like minigrad's (a chain with a shared
      // parameter), while nobody waits for a picture.
      try {
        v.render(warmupDot(40), { format: "svg", graphAttributes: { nslimit: "1", nslimit1: "1", mclimit: "0.1", remincross: "false" } });
      } catch (_) {
        /* a warm-up failure changes nothing */
      }
      return v;
    });
  }
  return vizPromise;
}

function errorText(result) {
  const errors = (result.errors || []).filter((e) => e.level === "error");
  const first = errors[0] || (result.errors || [])[0];
  return first ? first.message : "Graphviz could not lay out this graph.";
}

async function layout(dot, options = {}) {
  const v = await viz();
  const t0 = Date.now();
  const result = v.render(String(dot), {
    format: "svg",
    engine: "dot",
    graphAttributes: options.graphAttributes || {},
  });
  if (result.status !== "success") throw new Error(errorText(result));
  return { svg: result.output, ms: Date.now() - t0 };
}

async function ready() {
  await viz();
  return { graphvizVersion };
}

const inWorker =
  typeof WorkerGlobalScope !== "undefined" && typeof self !== "undefined" && self instanceof WorkerGlobalScope;

if (inWorker) {
  self.onmessage = async (event) => {
    const { id, type, dot, options } = event.data || {};
    try {
      const result = type === "ready" ? await ready() : await layout(dot, options);
      self.postMessage({ id, ok: true, ...result });
    } catch (error) {
      self.postMessage({ id, ok: false, error: String((error && error.message) || error) });
    }
  };
} else {
  globalThis.__minigrad_viz_backend = { layout, ready, graphvizVersion };
}
