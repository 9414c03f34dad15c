// One memory: its record and live header; edit its text or importance, or delete it.

import { api, userPath } from "../api.js";
import { chip, facts, h, json, link, number, problem, route, when } from "../dom.js";
import { ruleTree } from "./records.js";

// Where a memory of each type is listed.
const LIST_OF = { episodic: "episodes", semantic: "facts", procedural: "rules", working: "tasks" };

export async function memoryView({ user, id, refresh }) {
  const memory = await api("GET", userPath(user, ["memories", id]));
  const r = memory.record;
  const header = r.header;
  return [
    h("h1", { tabindex: "-1" }, chip(memory.type, memory.type), " ", memory.id),
    h("p", { class: "text card" }, memory.text),
    memory.type === "procedural" ? ruleTree(r) : null,
    facts([
      ["from turn", r.turn_id ? link(["u", user, "t", r.turn_id], r.turn_id) : ""],
      ["tier", String(header.tier)],
      ["importance", `${number(header.importance, 1)} (${header.importance_by})`],
      ["persona similarity", number(header.persona_sim)],
      ["recalled", `${header.recall_count} times`],
      ["last recalled", when(header.last_access) || "never"],
    ]),
    h("h2", {}, "Correct it"),
    editForm(user, memory, refresh),
    h("h2", {}, "Delete it"),
    deleteControls(user, memory, refresh),
    h("h2", {}, "The whole record"),
    json(r),
  ];
}

function editForm(user, memory, refresh) {
  const text = h("textarea", { id: "memory-text", maxlength: 16384 });
  text.value = memory.text;
  const importance = h("input", {
    id: "memory-importance",
    type: "number",
    min: 1,
    max: 10,
    step: 0.5,
    value: memory.record.header.importance,
  });
  const result = h("div", { "aria-live": "polite" });
  const form = h(
    "form",
    { class: "edit" },
    h("label", { for: "memory-text" }, "Text"),
    text,
    h(
      "div",
      { class: "actions" },
      h("label", { for: "memory-importance" }, "Importance (1–10)"),
      importance,
    ),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Save")),
    result,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const patch = {};
    if (text.value !== memory.text) patch.text = text.value;
    if (Number(importance.value) !== memory.record.header.importance)
      patch.importance = Number(importance.value);
    if (Object.keys(patch).length === 0) {
      result.replaceChildren(h("p", {}, "Nothing changed."));
      return;
    }
    try {
      await api("PATCH", userPath(user, ["memories", memory.id]), patch);
      await refresh("Saved.");
    } catch (error) {
      result.replaceChildren(problem(error));
    }
  });
  return form;
}

/** Delete asks once more, in place: the first button shows the one that deletes. */
function deleteControls(user, memory, refresh) {
  const result = h("div", { "aria-live": "polite" });
  const sure = h("button", { type: "button", class: "danger", hidden: true }, "Delete for good");
  const keep = h("button", { type: "button", hidden: true }, "Keep it");
  const ask = h("button", { type: "button", class: "danger" }, "Delete…");
  const toggle = (asking) => {
    ask.hidden = asking;
    sure.hidden = keep.hidden = !asking;
    (asking ? keep : ask).focus();
  };
  ask.addEventListener("click", () => toggle(true));
  keep.addEventListener("click", () => toggle(false));
  sure.addEventListener("click", async () => {
    sure.disabled = true;
    try {
      await api("DELETE", userPath(user, ["memories", memory.id]));
      await refresh(`Deleted "${memory.text}".`, route(["u", user, LIST_OF[memory.type]]));
    } catch (error) {
      sure.disabled = false;
      result.replaceChildren(problem(error));
    }
  });
  return h("div", {}, h("div", { class: "actions" }, ask, sure, keep), result);
}
