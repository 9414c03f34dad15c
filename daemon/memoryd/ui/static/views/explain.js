// Ask as the assistant would, and see why: the typed sections, the context block the prompt
// gets, each item's score and reason, and the tier stages the search went through.

import { api, userPath } from "../api.js";
import { chip, h, link, meta, number, problem, table } from "../dom.js";
import { MEMORY_TYPES } from "./users.js";

export async function explainView({ user }) {
  const query = h("input", {
    id: "query",
    type: "search",
    required: true,
    maxlength: 2048,
    size: 40,
  });
  const k = h("input", { id: "k", type: "number", min: 1, max: 50, value: 10 });
  const mode = h(
    "select",
    { id: "search-mode" },
    ["tiered", "all", "tier1", "tier2"].map((m) => h("option", { value: m }, m)),
  );
  const history = h("input", { id: "history", type: "checkbox" });
  const recall = h("input", { id: "recall", type: "checkbox" });
  const out = h("div", { class: "explanation", "aria-live": "polite" });
  const form = h(
    "form",
    { class: "row" },
    h("label", { for: "query" }, "Query"),
    query,
    h("label", { for: "k" }, "k"),
    k,
    h("label", { for: "search-mode" }, "search"),
    mode,
    h("label", { class: "inline" }, history, "superseded facts too"),
    h("label", { class: "inline" }, recall, "count as a recall (moves tiers)"),
    h("button", { type: "submit", class: "primary" }, "Explain"),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    out.replaceChildren(h("p", { class: "loading" }, "Searching…"));
    const body = {
      query: query.value,
      k: Number(k.value),
      search: mode.value,
      history: history.checked,
      recall: recall.checked,
    };
    try {
      out.replaceChildren(explanation(user, await api("POST", userPath(user, ["query"]), body)));
    } catch (error) {
      out.replaceChildren(problem(error));
    }
  });
  return [
    h("h1", { tabindex: "-1" }, `Explain a query for ${user}`),
    h(
      "p",
      {},
      "What the assistant would be given for this query. Unless you tick the box, looking " +
        "does not count as a recall, so the tiers stay as they are.",
    ),
    form,
    out,
  ];
}

// A stage searches the tiers up to its own.
const STAGE_NAMES = { 1: "tier 1", 2: "tiers 1–2", 3: "all tiers" };

function outcome(stage) {
  if (stage.skipped) return `skipped: ${stage.skipped}`;
  if (stage.stop) return `stopped: ${stage.stop}`;
  if (stage.sufficient === false) return `not sufficient, went deeper: ${stage.why}`;
  return "";
}

function explanation(user, reply) {
  const sections = MEMORY_TYPES.map((type) => {
    const items = reply.sections[type] ?? [];
    return h(
      "section",
      { class: `section ${type}` },
      h("h3", {}, chip(type, type), ` ${items.length}`),
      items.map((item) =>
        h(
          "article",
          { class: "card item", "data-id": item.id },
          h("p", { class: "text" }, link(["u", user, "m", item.id], item.text)),
          meta(`score ${number(item.score, 3)}`, item.why),
        ),
      ),
    );
  });
  const trace = reply.trace.map((t) => [
    link(["u", user, "m", t.id], t.id),
    chip(t.type, t.type),
    number(t.score, 3),
    t.hit ? "search hit" : "expansion",
    t.why,
    t.parse ?? "",
    t.turn_ids.map((turn) => link(["u", user, "t", turn], turn)),
  ]);
  const search = reply.search;
  const stages = (search.stages ?? []).map((s) => [
    STAGE_NAMES[s.tier] ?? `tier ${s.tier}`,
    String(s.pool ?? ""),
    String(s.hits ?? ""),
    outcome(s),
  ]);
  return h(
    "div",
    {},
    h("h2", {}, "Typed sections"),
    sections,
    h("h2", {}, "The context the prompt gets"),
    h("pre", { class: "context" }, reply.context),
    h("h2", {}, `Why each item (${reply.trace.length} of ${reply.candidates} candidates)`),
    table(["memory", "type", "score", "came by", "why", "read as", "turns"], trace),
    h("h2", {}, `Tier search: ${search.mode}`),
    table(["stage", "pool", "hits", "outcome"], stages),
  );
}
