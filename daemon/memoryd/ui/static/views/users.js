// The users with data, and one user's overview: what is stored, and forgetting it all.

import { api, download, userPath } from "../api.js";
import { action, chip, h, link, notice, problem, table } from "../dom.js";

export const MEMORY_TYPES = ["episodic", "semantic", "procedural", "working"];
const SUMMARISED = 50; // users whose counts the list loads (each opens the user's stores)

export async function usersView() {
  const { users } = await api("GET", "/v1/users");
  const heading = h("h1", { tabindex: "-1" }, "Users");
  if (users.length === 0) {
    return [
      heading,
      notice(
        "No user has data yet: an assistant adds one with its first POST /v1/users/<user>/turns.",
      ),
    ];
  }
  const rows = users.map((user) => [user, Array.from({ length: 7 }, () => h("span", {}, ""))]);
  fillSummaries(rows.slice(0, SUMMARISED));
  const headers = ["user", "turns", ...MEMORY_TYPES, "tiers 1 / 2 / 3", "router round"];
  return [
    heading,
    h(
      "p",
      {},
      `${users.length} user${users.length === 1 ? "" : "s"} with data.`,
      users.length > SUMMARISED
        ? ` Counts are shown for the first ${SUMMARISED}; open a user for theirs.`
        : "",
    ),
    table(
      headers,
      rows.map(([user, cells]) => [link(["u", user], user), ...cells]),
      { class: "users" },
    ),
  ];
}

/** The rows' counts, tiers and router rounds, one user at a time (each opens the user's
 * stores), until the table leaves the page. */
async function fillSummaries(rows) {
  rows.forEach(([, cells]) => cells.forEach((cell) => cell.replaceChildren("…")));
  for (const [index, [user, cells]] of rows.entries()) {
    if (index > 0 && !cells[0].isConnected) return;
    try {
      const { counts, tiers, router } = await summaryOf(user);
      const values = [
        counts.turns ?? 0,
        ...MEMORY_TYPES.map((t) => counts[`memories_${t}`] ?? 0),
        tierSizes(tiers.sizes),
        router.round,
      ];
      values.forEach((value, i) => cells[i].replaceChildren(String(value)));
    } catch (error) {
      cells.forEach((cell) => cell.replaceChildren());
      cells[0].replaceChildren(problem(error));
    }
  }
}

/** A user's store counts, tier status and router status. */
async function summaryOf(user) {
  const [{ counts }, tiers, router] = await Promise.all([
    api("GET", userPath(user)),
    api("GET", userPath(user, ["tiers"], { moves: 0 })),
    api("GET", userPath(user, ["router"])),
  ]);
  return { counts, tiers, router };
}

function tierSizes(sizes) {
  return [1, 2, 3].map((t) => sizes[`tier${t}`] ?? 0).join(" / ");
}

export async function userView({ user, refresh }) {
  const { counts, tiers, router } = await summaryOf(user);
  const memories = MEMORY_TYPES.map((t) => [t, counts[`memories_${t}`] ?? 0]);
  const total = memories.reduce((sum, [, n]) => sum + n, 0);
  return [
    h("h1", { tabindex: "-1" }, user),
    table(
      ["", "count"],
      [
        ["turns", String(counts.turns ?? 0)],
        ...memories.map(([t, n]) => [chip(t, t), String(n)]),
        ["tiers 1 / 2 / 3", tierSizes(tiers.sizes)],
        [
          "router round",
          `${router.round} (τ ${router.tau.toFixed(2)}, head: ${router.head.source})`,
        ],
      ],
    ),
    h("h2", {}, "Keep a copy"),
    h(
      "p",
      {},
      "Everything stored about this user, as the JSON lines memoryd export writes " +
        "(memoryd import loads it back).",
    ),
    exportButton(user),
    h("h2", {}, "Forget this user"),
    h("p", {}, "Removes everything memoryd holds about this user."),
    forgetButton(user, counts.turns ?? 0, memories, total, refresh),
  ];
}

function exportButton(user) {
  const saved = h("span", { class: "meta", "aria-live": "polite" });
  const button = action("Download the export", async () => {
    const bytes = await download(userPath(user, ["export"]), `${user}.jsonl`);
    saved.replaceChildren(`Saved ${user}.jsonl (${bytes} bytes).`);
  });
  return h("div", { class: "actions" }, button, saved);
}

/** Forgetting asks first, in a dialog that names what goes, and shows the receipt after. */
function forgetButton(user, turns, memories, total, refresh) {
  const typed = h("input", { id: "confirm-user", autocomplete: "off", spellcheck: "false" });
  const confirm = h("button", { type: "button", class: "danger", disabled: true }, "Forget");
  const cancel = h("button", { type: "button" }, "Keep");
  const result = h("div", { "aria-live": "polite" });
  const breakdown = memories.map(([t, n]) => `${n} ${t}`).join(", ");
  const dialog = h(
    "dialog",
    { "aria-labelledby": "forget-title" },
    h("h2", { id: "forget-title" }, `Forget ${user}?`),
    h(
      "p",
      {},
      `This removes ${turns} turns and ${total} memories (${breakdown}), with their graph, ` +
        `their vector indexes and every file under users/${user}. It cannot be undone: ` +
        "download the export first to keep a copy.",
    ),
    h("label", { for: "confirm-user" }, `Type ${user} to confirm`),
    typed,
    h("div", { class: "actions" }, confirm, cancel),
    result,
  );
  typed.addEventListener("input", () => {
    confirm.disabled = typed.value !== user;
  });
  cancel.addEventListener("click", () => dialog.close());
  confirm.addEventListener("click", async () => {
    confirm.disabled = true;
    try {
      const { removed } = await api("DELETE", userPath(user));
      dialog.close();
      const receipt =
        `Forgot ${user}: removed ${removed.turns} turns, ${removed.memories} memories, ` +
        `${removed.vectors} vectors, ${removed.graph_nodes} graph nodes and ${removed.files} files.`;
      await refresh(receipt, "#/");
    } catch (error) {
      result.replaceChildren(problem(error));
    }
  });
  const open = action(
    `Forget ${user}…`,
    async () => {
      typed.value = "";
      confirm.disabled = true;
      result.replaceChildren();
      dialog.showModal();
      typed.focus();
    },
    { class: "danger" },
  );
  return [open, dialog];
}
