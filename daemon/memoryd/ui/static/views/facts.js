// What is known about the user: current facts, and the history of superseded values with undo.

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

function factCard(user, fact, byId, refresh) {
  const r = fact.record;
  const replaced = byId.get(r.superseded_by);
  const replacedBy = r.superseded_by
    ? meta(
        h(
          "span",
          {},
          "replaced by ",
          link(["u", user, "m", r.superseded_by], replaced ? replaced.text : r.superseded_by),
        ),
      )
    : null;
  const undo = fact.current
    ? null
    : action(
        "Undo: make this current again",
        async () => {
          await api("POST", userPath(user, ["facts", fact.id, "undo"]));
          await refresh(`"${fact.text}" is current again.`);
        },
        { "data-fact": fact.id },
      );
  return h(
    "article",
    { class: `card fact${fact.current ? "" : " superseded"}`, "data-id": fact.id },
    h("p", { class: "text" }, link(["u", user, "m", fact.id], fact.text)),
    meta(
      `${r.subject} · ${r.negated ? "not " : ""}${r.relation.replaceAll("_", " ")} · ${r.object.name}`,
      h("span", {}, "valid ", when(r.valid_from) || "always", " – ", when(r.valid_to) || "now"),
      `confidence ${number(r.confidence)}`,
      `by ${r.origin} (${r.parse})`,
    ),
    meta(
      "sources:",
      r.sources.map((turnId) => link(["u", user, "t", turnId], turnId)),
    ),
    replacedBy,
    undo,
  );
}
