// The self-enhancing router: its round, threshold and head, and per round the validation
// macro-F1 and the share of routing decisions sent to the LLM, drawn as a small chart.

import { api, userPath } from "../api.js";
import { facts, h, number, s, table, when } from "../dom.js";

const W = 320;
const H = 140;
const PAD = 24;

export async function routerView({ user }) {
  const router = await api("GET", userPath(user, ["router"]));
  const rounds = router.rounds.map((r) => [
    String(r.round),
    r.kind,
    r.accepted ? "accepted" : "rejected",
    number(r.macro_f1_before, 3),
    number(r.macro_f1_after, 3),
    when(r.created_at),
  ]);
  const decisions = router.decisions.map((d) => [
    String(d.round),
    String(d.decisions),
    String(d.deferred),
    String(d.low_confidence),
    `${(d.llm_share * 100).toFixed(1)} %`,
  ]);
  return [
    h("h1", { tabindex: "-1" }, `Router of ${user}`),
    facts([
      ["round", String(router.round)],
      ["deferral threshold τ", number(router.tau)],
      [
        "head",
        `round ${router.head.round}, ${router.head.source}, temperature ${number(router.head.temperature)}`,
      ],
      ["LLM", router.llm ?? "none (no turn is deferred)"],
      [
        "label pool",
        `${router.pool.size} (${router.pool.new} new; a round every ${router.pool.retrain_every})`,
      ],
      [
        "queue",
        Object.entries(router.queue)
          .map(([k, v]) => `${v} ${k}`)
          .join(", "),
      ],
    ]),
    h("h2", {}, "Per round"),
    h(
      "figure",
      {},
      chart(router),
      h(
        "figcaption",
        { class: "meta" },
        "line: validation macro-F1 after the round · bars: share of the round's routing decisions sent to the LLM",
      ),
    ),
    h("h3", {}, "Training rounds"),
    rounds.length
      ? table(["round", "kind", "validation", "macro-F1 before", "macro-F1 after", "at"], rounds)
      : h("p", {}, "No training round yet: one runs when the label pool has enough new labels."),
    h("h3", {}, "Routing decisions"),
    table(["round", "decisions", "deferred", "low confidence", "LLM share"], decisions),
  ];
}

/** Macro-F1 after each round (line) over the LLM share of each round's decisions (bars). */
function chart(router) {
  const byRound = new Map();
  for (const d of router.decisions) byRound.set(d.round, { share: d.llm_share });
  for (const r of router.rounds) {
    byRound.set(r.round, { ...(byRound.get(r.round) ?? {}), f1: r.macro_f1_after });
  }
  const points = [...byRound].sort(([a], [b]) => a - b);
  const n = Math.max(points.length, 1);
  const x = (i) => PAD + ((W - 2 * PAD) * (i + 0.5)) / n;
  const y = (v) => H - PAD - (H - 2 * PAD) * v;
  const bar = (W - 2 * PAD) / n / 2;
  const line = points
    .map(([, p], i) => (typeof p.f1 === "number" ? `${x(i)},${y(p.f1)}` : null))
    .filter(Boolean);
  const title = `Macro-F1 and LLM share over ${points.length} round${points.length === 1 ? "" : "s"}`;
  return s(
    "svg",
    { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": title },
    s("title", {}, title),
    s("line", { class: "axis", x1: PAD, y1: H - PAD, x2: W - PAD, y2: H - PAD }),
    s("line", { class: "axis", x1: PAD, y1: PAD, x2: PAD, y2: H - PAD }),
    s("text", { x: 2, y: PAD + 3 }, "1.0"),
    s("text", { x: 2, y: H - PAD + 3 }, "0"),
    points.map(([round, p], i) => [
      s("rect", {
        class: "share",
        x: x(i) - bar / 2,
        y: y(p.share ?? 0),
        width: bar,
        height: (H - 2 * PAD) * (p.share ?? 0),
      }),
      s("text", { x: x(i) - 3, y: H - PAD + 12 }, String(round)),
    ]),
    line.length > 1 ? s("polyline", { class: "f1", points: line.join(" ") }) : null,
    line.map((pt) => {
      const [cx, cy] = pt.split(",");
      return s("circle", { class: "dot", cx, cy, r: 3 });
    }),
  );
}
