// The widgets' styles, injected once per document (or shadow root) from the bundle.
import CSS from "./styles.css";

const MARK = `minigrad-widgets-${__MINIGRAD_WIDGETS_VERSION__}`;

export function injectStyles(el) {
  const root = el && el.getRootNode ? el.getRootNode() : document;
  const host = root && root.nodeType === 11 /* shadow root */ ? root : document.head || document.documentElement;
  const owner = root && root.nodeType === 11 ? root : document;
  if (owner.querySelector && owner.querySelector(`style[data-minigrad="${MARK}"]`)) return;
  const style = document.createElement("style");
  style.setAttribute("data-minigrad", MARK);
  style.textContent = CSS;
  host.appendChild(style);
}
