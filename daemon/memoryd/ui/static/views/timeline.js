// A user's turns by session, with how the router labelled each, and one turn's memories.

import { api, userPath } from "../api.js";
import { chip, facts, h, link, meta, number, pager, problem, table, when } from "../dom.js";

const PAGE = 100;

export async function timelineView({ user }) {
  const sessions = h("div", { class: "timeline" });
  let group = null;
  let session = null;
  const more = await pager("Load more turns", async (cursor) => {
    const page = await api("GET", userPath(user, ["turns"], { limit: PAGE, cursor }));
    for (const turn of page.turns) {
      if (turn.session_id !== session) {
        session = turn.session_id;
        group = h("ol", { class: "turns" });
        sessions.append(
          h("section", { class: "session" }, h("h2", {}, `Session ${session}`), group),
        );
      }
      group.append(turnItem(user, turn));
    }
    return page.next_cursor;
  });
  const empty = sessions.childElementCount === 0 ? [h("p", {}, "No turns yet.")] : [];
  return [h("h1", { tabindex: "-1" }, `Timeline of ${user}`), ...empty, sessions, more];
}

function routing(turn) {
  return meta(
    turn.labels.map((label) => chip(label, label)),
    `confidence ${number(turn.confidence)}`,
    `routed by ${turn.routed_by}`,
  );
}

function turnItem(user, turn) {
  const made = h("div", { "aria-live": "polite" });
  const toggle = h("button", { type: "button", "aria-expanded": "false" }, "Memories made from it");
  toggle.addEventListener("click", async () => {
    if (toggle.getAttribute("aria-expanded") === "true") {
      toggle.setAttribute("aria-expanded", "false");
      made.replaceChildren();
      return;
    }
    toggle.setAttribute("aria-expanded", "true");
    try {
      const detail = await api("GET", userPath(user, ["turns", turn.turn_id]));
      made.replaceChildren(memoryLinks(user, detail));
    } catch (error) {
      made.replaceChildren(problem(error));
    }
  });
  return h(
    "li",
    { class: `turn ${turn.role}`, id: `turn-${turn.turn_id}` },
    meta(when(turn.ts), h("strong", {}, turn.speaker ?? turn.role), routing(turn)),
    h("p", { class: "text" }, turn.text),
    meta(link(["u", user, "t", turn.turn_id], "turn details"), toggle),
    made,
  );
}

function memoryLinks(user, detail) {
  if (detail.memories.length === 0) {
    return meta("No memory: the turn is kept in the journal only.");
  }
  return h(
    "ul",
    {},
    detail.memories.map((m) =>
      h("li", {}, chip(m.type, m.type), " ", link(["u", user, "m", m.id], m.id)),
    ),
  );
}

export async function turnView({ user, id }) {
  const turn = await api("GET", userPath(user, ["turns", id]));
  const effects = turn.reply.effects.map((e) => [
    link(["u", user, "m", e.id], e.id),
    e.effect,
    link(["u", user, e.by === turn.turn_id ? "t" : "m", e.by], e.by),
  ]);
  return [
    h("h1", { tabindex: "-1" }, "A turn"),
    h("p", { class: "text card" }, turn.text),
    facts([
      ["session", turn.session_id],
      ["at", when(turn.ts)],
      ["role", turn.role],
      ["speaker", turn.speaker],
      ["labels", turn.labels.map((label) => chip(label, label))],
      ["confidence", number(turn.confidence)],
      ["routed by", turn.routed_by],
      ["below the router's threshold", turn.reply.low_confidence ? "yes" : "no"],
      ["turn id", turn.turn_id],
    ]),
    h("h2", {}, "Memories made from it"),
    memoryLinks(user, turn),
    ...(effects.length
      ? [h("h2", {}, "What it changed"), table(["memory", "effect", "by"], effects)]
      : []),
  ];
}
