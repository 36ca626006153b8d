// Numbers, arrays, shapes and byte counts as short text (no DOM: every layer may use it).

/** One number as a student reads it: 4 significant digits, nan/inf for JSON's null. */
export function num(x) {
  if (x === null || x === undefined) return "nan/inf";
  if (typeof x !== "number") return String(x);
  if (x === 0) return "0";
  if (Number.isInteger(x) && Math.abs(x) < 1e6) return String(x);
  const a = Math.abs(x);
  if (a >= 1e-3 && a < 1e5) return String(Number(x.toPrecision(4)));
  return x.toExponential(2).replace("e+", "e");
}

/** The first values of an array: "[0.42, -1.5, …]" ("…" when the array has more). */
export function values(list, size, max = 8) {
  const shown = (list || []).slice(0, max);
  const more = (size !== undefined && size > shown.length) || (list || []).length > shown.length;
  return `[${shown.map(num).join(", ")}${more ? ", …" : ""}]`;
}

/** A gradient tag on the graph: a scalar's value, or a vector's first value in brackets, so
 * that "[1, …]" is not read as the number "1…". */
export function tagValues(list, size) {
  const first = (list || []).length ? num(list[0]) : "?";
  return size > 1 ? `[${first}, …]` : first;
}

/** A name cut to `max` characters in its middle: names that share a long prefix
 * ("blocks.0.attn_norm.weight", "blocks.0.attn_norm.out") stay apart by their ends. */
export function middleEllipsis(text, max = 17) {
  const s = String(text);
  if (s.length <= max) return s;
  const tail = Math.ceil((max - 1) / 2);
  return `${s.slice(0, max - 1 - tail)}…${s.slice(s.length - tail)}`;
}

/** A shape as the drawings write it beside a name: "3x2", "(3,)" for a vector, "scalar" for [].
 * The one shape-to-text of the page; Python's drawings write the same (minigrad/widgets/dot.py
 * `_shape` over minigrad/names.py `shape_text`), so a label reads alike in the kernel's DOT,
 * the page's (trace/open-scopes-dot.js) and the inspector. */
export function shapeText(dims) {
  // (a vector's length alone, "2", reads as a value: numpy writes it "(2,)")
  if (dims && dims.length === 1) return `(${dims[0]},)`;
  return dims && dims.length ? dims.join("x") : "scalar";
}

/** shapeText in parentheses after a name, as Python's traces write it: "W (3x2)", "b (5,)". */
export function shapeInParens(dims) {
  return dims && dims.length === 1 ? shapeText(dims) : `(${shapeText(dims)})`;
}

export function bytes(n) {
  if (n === null || n === undefined || !Number.isFinite(n)) return "?";
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(n < 10240 ? 1 : 0)} KiB`;
  if (n < 1024 ** 3) return `${(n / 1024 ** 2).toFixed(1)} MiB`;
  return `${(n / 1024 ** 3).toFixed(1)} GiB`;
}

export function count(n) {
  return Number(n).toLocaleString("en-US");
}
