// Building the page from data. Every string goes in as text (text nodes, attribute values):
// nothing here parses a string as HTML, and the daemon's CSP (Trusted Types with no policy)
// makes any HTML sink throw, so a stored "<script>" is shown, never run.

/** An element: h("a", {href: "#/", class: "x", onclick: fn}, "text", child, [more]). */
export function h(tag, props = {}, ...children) {
  return build(document.createElement(tag), props, children);
}

/** An SVG element, as h() builds HTML ones. */
export function s(tag, props = {}, ...children) {
  return build(document.createElementNS("http://www.w3.org/2000/svg", tag), props, children);
}

function build(el, props, children) {
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

/** A link inside the page (hash routes only: no stored string ever becomes a URL). */
export function link(parts, text, props = {}) {
  return h("a", { ...props, href: route(parts) }, text);
}

/** "#/u/alice/m/m-1" from ["u", "alice", "m", "m-1"], each part encoded. */
export function route(parts) {
  return "#/" + parts.map((p) => encodeURIComponent(p)).join("/");
}

/** A table: headers, then rows of cells (strings or nodes). */
export function table(headers, rows, props = {}) {
  return h(
    "div",
    { class: "scroll" },
    h(
      "table",
      props,
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          headers.map((x) => h("th", { scope: "col" }, x)),
        ),
      ),
      h(
        "tbody",
        {},
        rows.map((row) =>
          h(
            "tr",
            {},
            row.map((cell) => h("td", {}, cell)),
          ),
        ),
      ),
    ),
  );
}

/** A definition list from [term, value] pairs (pairs with an empty value are left out). */
export function facts(pairs) {
  const items = pairs.filter(([, v]) => v !== undefined && v !== null && v !== "");
  return h(
    "dl",
    { class: "pairs" },
    items.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]),
  );
}

export function chip(text, kind = "") {
  return h("span", { class: `chip ${kind}`.trim() }, text);
}

/** A timestamp as the reader's local time, with the stored ISO value as its title. */
export function when(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return String(iso);
  return h("time", { datetime: iso, title: iso }, date.toLocaleString());
}

export function number(value, digits = 2) {
  return typeof value === "number" ? value.toFixed(digits) : "";
}

/** JSON shown as text. */
export function json(value) {
  return h("pre", { class: "json" }, JSON.stringify(value, null, 2));
}

/** A button that disables itself while its action runs, and reports a failure beside it. */
export function action(label, run, props = {}) {
  const button = h("button", { type: "button", ...props }, label);
  let shown = null;
  button.addEventListener("click", async () => {
    button.disabled = true;
    shown?.remove();
    try {
      await run();
    } catch (error) {
      shown = problem(error);
      button.after(shown);
    } finally {
      button.disabled = false;
    }
  });
  return button;
}

/** Load the first page now, and the next on each press of the returned "load more" button
 * (hidden once there is none): ``load(cursor)`` shows a page and gives the next cursor. */
export async function pager(label, load) {
  let cursor = 0;
  const more = action(label, async () => {
    cursor = await load(cursor);
    more.hidden = cursor === null;
  });
  cursor = await load(cursor);
  more.hidden = cursor === null;
  return more;
}

export function problem(error) {
  return h("p", { class: "error", role: "alert" }, error.message || String(error));
}

export function notice(text) {
  return h("p", { class: "notice", role: "status" }, text);
}

/** A line of small facts side by side: each part its own box, so they are spaced apart. */
export function meta(...parts) {
  const items = parts
    .flat(Infinity)
    .filter((p) => p !== null && p !== undefined && p !== false && p !== "");
  return h(
    "div",
    { class: "meta" },
    items.map((p) => (p instanceof Node ? p : h("span", {}, p))),
  );
}
