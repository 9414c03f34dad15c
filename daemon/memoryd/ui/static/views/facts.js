// What is known about the user: current facts as subject, attribute and value, what each
// replaced, and the history of superseded values with undo.

import { api, userPath } from "../api.js";
import { action, h, link, meta, number, when } from "../dom.js";

export async function factsView({ user, refresh }) {
  const { facts } = await api("GET", userPath(user, ["facts"], { history: true }));
  const byId = new Map(facts.map((f) => [f.id, f]));
  const current = facts.filter((f) => f.current);
  const superseded = facts.filter((f) => !f.current);
  return [
    h("h1", { tabindex: "-1" }, `Facts about ${user}`),
    h("h2", {}, `Current (${current.length})`),
    current.length ? current.map((f) => factCard(user, f, byId)) : h("p", {}, "No current fact."),
    h("h2", {}, `History: superseded values (${superseded.length})`),
    superseded.length
      ? superseded.map((f) => factCard(user, f, byId, refresh))
      : h("p", {}, "Nothing was superseded."),
  ];
}

function replacedLine(user, r, byId) {
  if (!r.superseded_by) return null;
  if (r.superseded_by.startsWith("reread")) {
    return meta(`closed by a reread of the facts (${r.superseded_by.replaceAll("_", " ")})`);
  }
  const by = byId.get(r.superseded_by);
  return meta(
    h(
      "span",
      {},
      "replaced by ",
      link(["u", user, "m", r.superseded_by], by ? by.line : r.superseded_by),
    ),
  );
}

function factCard(user, fact, byId, refresh) {
  const r = fact.record;
  const replaced = [...byId.values()].filter((f) => f.record.superseded_by === fact.id);
  const replacedWhat = replaced.length
    ? meta(
        "replaced:",
        replaced.map((f) => link(["u", user, "m", f.id], f.line)),
      )
    : null;
  const newer = byId.get(r.doubted_by);
  const doubted = r.doubted_by
    ? meta(
        h(
          "span",
          { class: "doubted" },
          "possibly outdated: see ",
          link(["u", user, "m", r.doubted_by], newer ? newer.line : r.doubted_by),
        ),
      )
    : null;
  const undo = fact.current
    ? null
    : action(
        "Undo: make this current again",
        async () => {
          await api("POST", userPath(user, ["facts", fact.id, "undo"]));
          await refresh(`"${fact.line}" is current again.`);
        },
        { "data-fact": fact.id },
      );
  return h(
    "article",
    { class: `card fact${fact.current ? "" : " superseded"}`, "data-id": fact.id },
    h("p", { class: "text statement" }, link(["u", user, "m", fact.id], fact.line)),
    h("p", { class: "source" }, `“${fact.text}”`),
    meta(
      h("span", {}, "valid ", when(r.valid_from) || "always", " – ", when(r.valid_to) || "now"),
      `${r.kind || "state"}`,
      `confidence ${number(r.confidence)}`,
      `by ${r.origin} (${r.parse})`,
    ),
    meta(
      "sources:",
      r.sources.map((turnId) => link(["u", user, "t", turnId], turnId)),
    ),
    doubted,
    replacedWhat,
    replacedLine(user, r, byId),
    undo,
  );
}
