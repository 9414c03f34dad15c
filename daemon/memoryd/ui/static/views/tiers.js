// Tiers and persona: sizes against capacity, the persona profile and its drift, recent moves.

import { api, userPath } from "../api.js";
import { action, facts, h, json, link, number, table, when } from "../dom.js";

const MOVES_SHOWN = 50;

export async function tiersView({ user, refresh }) {
  const tiers = await api("GET", userPath(user, ["tiers"], { moves: MOVES_SHOWN }));
  const { sizes, capacity, persona } = tiers;
  const drift = h("meter", {
    min: 0,
    max: Math.max(persona.drift_threshold * 2, persona.drift, 0.01),
    high: persona.drift_threshold,
    value: persona.drift,
    "aria-label": "persona drift",
  });
  const moves = tiers.moves.map((m) => [
    link(["u", user, "m", m.id], m.id),
    `${m.from} → ${m.to}`,
    m.to < m.from ? "promoted" : "demoted",
    number(m.score, 3),
    m.reason,
    when(m.at),
  ]);
  const reshuffle = action("Reshuffle now", async () => {
    const done = await api("POST", userPath(user, ["tiers", "reshuffle"]));
    await refresh(
      `Reshuffled ${done.scored} records: ${done.promoted} promoted, ${done.demoted} demoted ` +
        `(${number(done.seconds, 2)} s).`,
    );
  });
  return [
    h("h1", { tabindex: "-1" }, `Tiers and persona of ${user}`),
    table(
      ["tier", "records", "holds"],
      [
        [
          "1 (cache)",
          String(sizes.tier1 ?? 0),
          `the last ${capacity.recent_sessions} sessions and the best ${capacity.tier1_by_score} by score`,
        ],
        ["2 (buffer)", String(sizes.tier2 ?? 0), `up to ${capacity.tier2}`],
        ["3 (archive)", String(sizes.tier3 ?? 0), "the rest"],
      ],
    ),
    h("div", { class: "actions" }, reshuffle),
    h("h2", {}, "Persona"),
    h(
      "p",
      { class: "text card" },
      persona.profile || "No profile yet: it is built from current facts.",
    ),
    facts([
      ["from facts", String(persona.facts)],
      [
        "drift",
        h(
          "span",
          {},
          drift,
          ` ${number(persona.drift, 3)} (re-scores past ${number(persona.drift_threshold, 2)})`,
        ),
      ],
      ["anchored", when(persona.anchored_at) || "not yet"],
      ["last reshuffle", tiers.last_reshuffle ? json(tiers.last_reshuffle) : "none yet"],
      ["last drift check", tiers.last_drift ? json(tiers.last_drift) : "none yet"],
    ]),
    h("h2", {}, `Recent promotions and demotions (${moves.length})`),
    moves.length
      ? table(["memory", "tiers", "move", "score", "reason", "at"], moves)
      : h("p", {}, "No move yet."),
  ];
}
