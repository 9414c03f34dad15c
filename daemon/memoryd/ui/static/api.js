// The daemon's /v1 API from the page. The token lives in this tab's session storage only: it
// is sent as the Authorization header, never in a URL or a cookie.

const TOKEN_KEY = "memoryd.token";

export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY),
  set: (value) => sessionStorage.setItem(TOKEN_KEY, value),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

/** A refused or failed request: the HTTP status (0: no answer) and the daemon's message. */
export class ApiError extends Error {
  constructor(status, type, message) {
    super(message);
    this.status = status;
    this.type = type;
  }
}

export const UNREACHABLE =
  "memoryd is not answering. Start it (memoryd serve, or make run) and this page reconnects.";

/** Send one request; the parsed JSON reply, or an ApiError. A 401 also signs the tab out. */
export async function api(method, path, body) {
  const reply = await send(method, path, body);
  return reply.json().catch(() => null);
}

/** Save a reply's body as a file of the reader's (an export), through a short-lived blob URL:
 * the request carries the token, which a plain link could not. */
export async function download(path, filename) {
  const blob = await (await send("GET", path)).blob();
  const url = URL.createObjectURL(blob);
  const save = Object.assign(document.createElement("a"), { href: url, download: filename });
  document.body.append(save);
  save.click();
  save.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
  return blob.size;
}

async function send(method, path, body) {
  const headers = { Authorization: `Bearer ${token.get() ?? ""}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let reply;
  try {
    reply = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
      credentials: "omit",
    });
  } catch {
    throw new ApiError(0, "Unreachable", UNREACHABLE);
  }
  if (reply.ok) return reply;
  const error = (await reply.json().catch(() => null))?.error ?? {};
  const message = error.message ?? `${reply.status} ${reply.statusText}`;
  if (reply.status === 401) {
    token.clear();
    window.dispatchEvent(new CustomEvent("memoryd:signed-out", { detail: message }));
  }
  throw new ApiError(reply.status, error.type ?? "HTTPError", message);
}

/** "/v1/users/<user>/<rest...>", each part encoded; query parameters from an object. */
export function userPath(user, rest = [], params = {}) {
  const path = ["v1", "users", user, ...rest].map(encodeURIComponent).join("/");
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    for (const one of [value].flat()) if (one !== undefined && one !== null) query.append(key, one);
  }
  const text = query.toString();
  return `/${path}${text ? `?${text}` : ""}`;
}

/** The daemon's state from /readyz: "ready", "recovering", "starting" or "down". */
export async function readiness() {
  try {
    const reply = await fetch("/readyz", { cache: "no-store", credentials: "omit" });
    const data = await reply.json().catch(() => ({}));
    return data.status ?? (reply.ok ? "ready" : "down");
  } catch {
    return "down";
  }
}
