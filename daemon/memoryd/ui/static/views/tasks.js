// The user's tasks: state trajectories and the moves each state allows.

import { api, userPath } from "../api.js";
import { action, chip, h, link, meta, when } from "../dom.js";

// What a task may do next, from the daemon's rule: a pending task is done or cancelled; a
// finished one is reopened first.
const MOVES = {
  pending: [
    ["done", "Mark done"],
    ["cancelled", "Cancel"],
  ],
  done: [["pending", "Reopen"]],
  cancelled: [["pending", "Reopen"]],
  expired: [["pending", "Reopen"]],
};

export async function tasksView({ user, refresh }) {
  const { tasks } = await api("GET", userPath(user, ["tasks"]));
  const open = tasks.filter((t) => status(t) === "pending");
  const closed = tasks.filter((t) => status(t) !== "pending");
  return [
    h("h1", { tabindex: "-1" }, `Tasks of ${user}`),
    h("h2", {}, `Open (${open.length})`),
    open.length ? open.map((t) => taskCard(user, t, refresh)) : h("p", {}, "No open task."),
    h("h2", {}, `Finished (${closed.length})`),
    closed.map((t) => taskCard(user, t, refresh)),
  ];
}

function status(task) {
  return task.record.states.at(-1)?.status ?? "pending";
}

function taskCard(user, task, refresh) {
  const r = task.record;
  const now = status(task);
  const moves = (MOVES[now] ?? []).map(([to, label]) =>
    action(
      label,
      async () => {
        await api("PATCH", userPath(user, ["tasks", task.id]), {
          status: to,
          note: "set in the inspector",
        });
        await refresh(`"${r.title}" is now ${to}.`);
      },
      { "data-move": to },
    ),
  );
  return h(
    "article",
    { class: "card task", "data-id": task.id },
    h("p", { class: "text" }, chip(now, now), " ", link(["u", user, "m", task.id], r.title)),
    meta(r.due ? h("span", {}, "due ", when(r.due)) : "no due time", `by ${r.origin} (${r.parse})`),
    h(
      "ol",
      { class: "trajectory", "aria-label": "state trajectory" },
      r.states.map((s) =>
        h(
          "li",
          {},
          chip(s.status, s.status),
          " ",
          when(s.ts),
          s.note ? ` — ${s.note}` : "",
          s.turn_id ? [" (", link(["u", user, "t", s.turn_id], "turn"), ")"] : "",
        ),
      ),
    ),
    h("div", { class: "actions" }, moves),
  );
}
