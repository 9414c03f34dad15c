// The inspector's shell: sign-in, the daemon's state, and hash routes to the views.
//   #/                      users
//   #/u/<user>[/<section>[/<id>]]   one user's overview, timeline, facts, tasks, rules,
//                           episodes, a turn (t), a memory (m), explain, tiers, router

import { api, readiness, token, UNREACHABLE } from "./api.js";
import { h, link, notice, problem } from "./dom.js";
import { explainView } from "./views/explain.js";
import { factsView } from "./views/facts.js";
import { memoryView } from "./views/memory.js";
import { episodesView, rulesView } from "./views/records.js";
import { routerView } from "./views/router.js";
import { tasksView } from "./views/tasks.js";
import { tiersView } from "./views/tiers.js";
import { timelineView, turnView } from "./views/timeline.js";
import { usersView, userView } from "./views/users.js";

const main = document.getElementById("main");
const banner = document.getElementById("daemon-state");
const signOut = document.getElementById("sign-out");

// A user's sections: [route part, tab label (none: reached by links only), view].
const SECTIONS = [
  ["", "Overview", userView],
  ["timeline", "Timeline", timelineView],
  ["facts", "Facts", factsView],
  ["tasks", "Tasks", tasksView],
  ["rules", "Rules", rulesView],
  ["episodes", "Episodes", episodesView],
  ["explain", "Explain", explainView],
  ["tiers", "Tiers", tiersView],
  ["router", "Router", routerView],
  ["t", null, turnView],
  ["m", null, memoryView],
];

const STATE_MESSAGES = {
  down: UNREACHABLE,
  starting: "memoryd is starting.",
  recovering:
    "memoryd is recovering: it is bringing the graph and vector indexes up to date with the " +
    "journals. What this page shows may be incomplete until it is ready.",
};

let rendering = 0; // the latest navigation; an older one that finishes later is dropped
let flash = null; // a message for the next render (what an action did)

function resolve(hash) {
  let parts;
  try {
    parts = hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  } catch {
    return null;
  }
  if (parts.length === 0) return { view: usersView };
  if (parts[0] !== "u" || parts.length < 2 || parts.length > 4) return null;
  const [, user, section = "", id] = parts;
  const found = SECTIONS.find(([name]) => name === section);
  if (!found || (id === undefined) !== (found[1] !== null)) return null;
  return { view: found[2], user, section, id };
}

function userTabs(user, section) {
  const tabs = SECTIONS.filter(([, label]) => label !== null).map(([name, label]) =>
    h(
      "li",
      {},
      link(["u", user, ...(name ? [name] : [])], label, {
        "aria-current": name === section ? "page" : undefined,
      }),
    ),
  );
  return h(
    "nav",
    { class: "tabs", "aria-label": `Sections of ${user}` },
    h("p", {}, link([], "Users"), " / ", h("strong", {}, user)),
    h("ul", {}, tabs),
  );
}

async function render() {
  const ticket = ++rendering;
  if (token.get() === null) {
    if (await tokenNeeded()) {
      if (ticket === rendering) showSignIn();
      return;
    }
    token.set(""); // the daemon runs with auth.enabled = false: there is nothing to sign in with
  }
  signOut.hidden = token.get() === "";
  const target = resolve(location.hash);
  if (target === null) {
    main.replaceChildren(
      h("h1", { tabindex: "-1" }, "No such page"),
      link([], "Back to the users"),
    );
    return;
  }
  main.replaceChildren(h("p", { class: "loading" }, "Loading…"));
  // Draw this view again (or go to `hash`), with a message saying what an action did.
  const refresh = (message, hash) => {
    flash = message ?? null;
    if (hash !== undefined && hash !== location.hash) {
      location.hash = hash; // the hashchange draws it
      return undefined;
    }
    return render();
  };
  let content;
  try {
    content = await target.view({ user: target.user, id: target.id, refresh });
  } catch (error) {
    if (error.status === 401) return; // signed out: the sign-in form is shown
    content = [h("h1", { tabindex: "-1" }, "This view could not be loaded"), problem(error)];
  }
  if (ticket !== rendering) return;
  const shown = flash === null ? [] : [notice(flash)];
  flash = null;
  const tabs = target.user === undefined ? [] : [userTabs(target.user, target.section)];
  const nodes = [content].flat(Infinity).filter((node) => node !== null && node !== undefined);
  main.replaceChildren(...tabs, ...shown, ...nodes);
  main.querySelector("h1")?.focus();
}

/** Whether the daemon wants a token: a request without one is refused. */
async function tokenNeeded() {
  try {
    const reply = await fetch("/v1/users", { cache: "no-store", credentials: "omit" });
    return reply.status === 401;
  } catch {
    return true;
  }
}

function showSignIn(message) {
  rendering++;
  signOut.hidden = true;
  const input = h("input", {
    id: "token",
    name: "token",
    type: "password",
    autocomplete: "off",
    spellcheck: "false",
    required: true,
  });
  const result = h("div", { "aria-live": "polite" });
  const form = h(
    "form",
    { class: "sign-in" },
    h("label", { for: "token" }, "API token"),
    input,
    h("button", { type: "submit" }, "Sign in"),
    result,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    token.set(input.value.trim());
    try {
      await api("GET", "/v1/users");
      render();
    } catch (error) {
      if (error.status !== 401) result.replaceChildren(problem(error));
    }
  });
  main.replaceChildren(
    h("h1", { tabindex: "-1" }, "Sign in"),
    h(
      "p",
      {},
      "Paste the daemon's token: the file token in its data directory (var/token after make " +
        "run). It is kept in this tab only and sent with each request.",
    ),
    ...(message ? [problem({ message })] : []),
    form,
  );
  input.focus();
}

let daemonState = "ready";

async function watchDaemon() {
  const state = await readiness();
  if (state !== daemonState) {
    const was = daemonState;
    daemonState = state;
    banner.hidden = state === "ready";
    banner.className = `daemon-state ${state}`;
    banner.textContent = STATE_MESSAGES[state] ?? `memoryd is ${state}.`;
    if (state === "ready" && was !== "ready") render(); // what was drawn may be incomplete
  }
  setTimeout(watchDaemon, state === "ready" ? 4000 : 1500);
}

window.addEventListener("hashchange", render);
window.addEventListener("memoryd:signed-out", (event) =>
  showSignIn(`The daemon refused the token (${event.detail}). Paste the current one.`),
);
signOut.addEventListener("click", () => {
  token.clear();
  showSignIn();
});
render();
watchDaemon();
