// Rules as trees (conditions, steps, branches) and episodes with their entities; both take
// feedback, which feeds the rules' support and the abstraction of episodes into rules.

import { api, userPath } from "../api.js";
import { action, chip, h, link, meta, pager, when } from "../dom.js";

const PAGE = 50;

export async function rulesView(ctx) {
  return paged(ctx, "procedural", `Rules of ${ctx.user}`, ruleCard);
}

export async function episodesView(ctx) {
  return paged(ctx, "episodic", `Episodes of ${ctx.user}`, episodeCard);
}

async function paged({ user }, type, title, card) {
  const list = h("div", {});
  const more = await pager("Load more", async (cursor) => {
    const page = await api("GET", userPath(user, ["memories"], { type, limit: PAGE, cursor }));
    list.append(...page.memories.map((m) => card(user, m)));
    return page.next_cursor;
  });
  const empty = list.childElementCount === 0 ? [h("p", {}, `No ${type} memory yet.`)] : [];
  return [h("h1", { tabindex: "-1" }, title), ...empty, list, more];
}

/** The rule's tree: its conditions, the main line's steps in order, each branch's steps. */
export function ruleTree(record) {
  const nodes = [...record.nodes].sort((a, b) => a.ord - b.ord);
  const conditions = nodes.filter((n) => n.kind === "condition").map((n) => n.text);
  const steps = nodes.filter((n) => n.kind === "action" && n.when === null).map((n) => n.text);
  const branches = new Map();
  for (const n of nodes.filter((x) => x.kind === "action" && x.when !== null)) {
    branches.set(n.when, [...(branches.get(n.when) ?? []), n.text]);
  }
  return h(
    "ul",
    { class: "tree" },
    h("li", {}, h("strong", {}, "if "), conditions.join(" and ") || "always"),
    h(
      "li",
      {},
      h("strong", {}, "then "),
      h(
        "ol",
        {},
        steps.map((t) => h("li", {}, t)),
      ),
    ),
    [...branches].map(([case_, actions]) =>
      h(
        "li",
        {},
        h("strong", {}, `when ${case_} `),
        h(
          "ol",
          {},
          actions.map((t) => h("li", {}, t)),
        ),
      ),
    ),
  );
}

function tally(record) {
  return `helpful ${record.positive} · not helpful ${record.negative}`;
}

function votes(user, memory) {
  const r = memory.record;
  const shown = h("span", { class: "votes" }, tally(r));
  const vote = (value, label) =>
    action(
      label,
      async () => {
        const updated = await api("POST", userPath(user, ["memories", memory.id, "feedback"]), {
          value,
        });
        shown.textContent = tally(updated.record);
      },
      { "data-vote": value },
    );
  return h(
    "div",
    { class: "actions" },
    shown,
    vote("positive", "Helpful"),
    vote("negative", "Not helpful"),
  );
}

function ruleCard(user, memory) {
  const r = memory.record;
  return h(
    "article",
    { class: "card rule", "data-id": memory.id },
    h("h3", {}, link(["u", user, "m", memory.id], r.title)),
    ruleTree(r),
    meta(
      `support ${r.support}`,
      r.tags.map((t) => chip(t)),
      `by ${r.origin} (${r.parse})`,
      link(["u", user, "t", r.turn_id], "from this turn"),
    ),
    votes(user, memory),
  );
}

function episodeCard(user, memory) {
  const r = memory.record;
  return h(
    "article",
    { class: "card episode", "data-id": memory.id },
    meta(when(r.ts), r.speaker ? h("strong", {}, r.speaker) : null, `session ${r.session_id}`),
    h("p", { class: "text" }, link(["u", user, "m", memory.id], memory.text)),
    r.event_time ? meta(h("span", {}, "happened ", when(r.event_time))) : null,
    meta(
      r.mentions.length ? "entities:" : "no entity",
      r.mentions.map((m) => chip(`${m.entity.name} (${m.entity.type})`)),
    ),
    votes(user, memory),
  );
}
