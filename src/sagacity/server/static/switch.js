// Sagacity dashboard: the kill switch (GET/POST /sagacity/switch; docs/policies.md).
// Loaded after app.js and built on its helpers (h, api, main, notice, when, has). Auditors see the
// settings in force; an admin sets or lifts one, after a confirmation that spells out the change.
// Every change is journaled (saga sagacity:switch) under the signed-in principal.
"use strict";

const SWITCH_STATES = {
  halt: "no saga starts; running sagas get their next call refused and compensate (one tool: its calls are refused)",
  drain: "no saga starts; running sagas go on and finish (one tool: its calls are denied)",
  lift: "back to normal",
};

function whom(s) {
  return s.scope === "global" ? "every agent" : `${s.scope} ${s.target}`;
}

function switchView(fresh) {
  const rows = h("tbody", { id: "switch-rows" });
  const table = h("table", { class: "sagas switch" },
    h("thead", {}, h("tr", {}, ["state", "for", "set by", "reason", "until", "set at"].map((t) => h("th", {}, t)))), rows);
  const off = h("div", { class: "empty", id: "switch-off", hidden: true }, "The kill switch is off: nothing is halted or drained.");
  const form = has("admin") ? switchForm(() => load()) : null;
  main(h("h1", {}, "Kill switch"), off, table, form);
  async function load() {
    const settings = await api("switch");
    if (!fresh()) return;
    keepingPlace(() => {
      table.hidden = !settings.length;
      off.hidden = !!settings.length;
      reconcile(rows, settings.map((s) => keyed(String(s.seq), s, h("tr", { "data-setting": `${s.scope}:${s.target || ""}` },
        h("td", {}, pill(s.state.toUpperCase(), s.state === "halt" ? "bad" : "warn")),
        h("td", {}, whom(s)),
        h("td", {}, s.by),
        h("td", {}, s.reason || "—"),
        h("td", { class: "mono" }, s.until ? when(s.until) : "until lifted"),
        h("td", { class: "mono" }, when(s.setAt))))));
    });
  }
  return { load, keys: () => false };
}

function switchForm(reload) {
  const state = h("select", { id: "switch-state" }, Object.keys(SWITCH_STATES).map((s) => h("option", { value: s }, s)));
  const scope = h("select", { id: "switch-scope" }, [["global", "every agent"], ["agent", "one agent"], ["tool", "one tool"]]
    .map(([v, t]) => h("option", { value: v }, t)));
  const target = h("input", { id: "switch-target", type: "text", placeholder: "agent or tool name", spellcheck: "false" });
  const ttl = h("input", { id: "switch-ttl", type: "number", min: "1", placeholder: "minutes (empty: until lifted)" });
  const reason = h("input", { id: "switch-reason", type: "text", placeholder: "why (journaled)" });
  const confirmBox = h("div", { class: "confirm", id: "switch-confirm", hidden: true });
  function change() {
    const body = { state: state.value, reason: reason.value };
    if (scope.value !== "global") body[scope.value] = target.value.trim();
    if (ttl.value && state.value !== "lift") body.ttl = Number(ttl.value) * 60;
    return body;
  }
  function review(event) {
    event.preventDefault();
    const body = change();
    if (scope.value !== "global" && !body[scope.value]) { notice(`Name the ${scope.value}.`, "bad"); return; }
    const send = h("button", { class: "btn reject", type: "button", id: "switch-send" }, `Confirm ${body.state}`);
    send.onclick = async () => {
      send.disabled = true;
      try {
        const setting = await api("switch", { method: "POST", json: body });
        notice(`Journaled at seq ${setting.seq}: ${setting.state} for ${whom(setting)} by ${setting.by}.`, "ok");
        confirmBox.hidden = true;
        await reload();
      } catch (err) {
        notice(err.message, "bad");
        send.disabled = false;
      }
    };
    confirmBox.replaceChildren(
      h("p", {}, h("strong", {}, `${body.state.toUpperCase()} for ${scope.value === "global" ? "every agent" : `${scope.value} ${body[scope.value]}`}`),
        body.ttl ? ` for ${duration(body.ttl)}` : "", `: ${SWITCH_STATES[body.state]}.`),
      h("p", { class: "muted" }, `Journaled under your name, ${me.name}${body.reason ? `, with the reason “${body.reason}”` : ""}.`),
      h("div", { class: "actions" }, send,
        h("button", { class: "btn", type: "button", onclick: () => { confirmBox.hidden = true; } }, "Cancel")));
    confirmBox.hidden = false;
  }
  return h("form", { class: "switch-form", id: "switch-form", onsubmit: review },
    h("h2", {}, "Change it"),
    h("div", { class: "row" }, state, scope, target, ttl, reason,
      h("button", { class: "btn", type: "submit", id: "switch-review" }, "Review…")),
    confirmBox);
}
