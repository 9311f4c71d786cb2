/* The permissions page: the grants on a namespace and on each of its topics, and forms that
 * grant or revoke them.  As with rates, every change is first sent with dryRun=true and shown
 * ("role app: produce → produce, consume"); only the user's confirmation sends it for real. */
"use strict";

const ACTIONS = ["produce", "consume"];

function actionsText(actions) {
  return actions && actions.length ? actions.join(", ") : "no action";
}

/* What a dry run's permissions would change against today's, as readable lines. */
function grantChanges(now, after) {
  const roles = [...new Set([...Object.keys(now), ...Object.keys(after)])].sort();
  return roles.filter((r) => JSON.stringify(now[r] || null) !== JSON.stringify(after[r] || null))
    .map((r) => "role " + r + ": " + (r in now ? actionsText(now[r]) : "not granted") + " → " +
      (r in after ? actionsText(after[r]) : "not granted"));
}

/* A grant/revoke form for one target (a namespace or a topic) at ``path`` (…/permissions). */
function grantForm(label, path, now, reload) {
  const id = (s) => label.replace(/\W+/g, "-") + "-" + s;
  const role = h("input", { id: id("role"), name: "role", required: true, autocomplete: "off" });
  const boxes = ACTIONS.map((a) => h("input", { type: "checkbox", id: id(a), value: a }));
  const result = h("div.dry-run-slot");
  const send = async (method, dryRun) => {
    const name = role.value.trim();
    const body = method === "POST" ? boxes.filter((b) => b.checked).map((b) => b.value)
      : undefined;
    return Api.call(method, path + "/" + encodeURIComponent(name),
      { query: dryRun ? { dryRun: "true" } : undefined, body });
  };
  const preview = (method) => async () => {
    result.replaceChildren();
    if (!role.value.trim()) { role.focus(); return; }
    try {
      const answer = await send(method, true);
      const lines = grantChanges(now, answer.permissions || {});
      const apply = h("button.primary", { type: "button" }, "Apply change");
      const cancel = h("button", { type: "button" }, "Cancel");
      apply.addEventListener("click", async () => {
        try {
          await send(method, false);
          flash("Applied: " + (lines[0] || "no change") + " on " + label);
          reload();
        } catch (err) { result.replaceChildren(errorBox(err)); }
      });
      cancel.addEventListener("click", () => result.replaceChildren());
      result.replaceChildren(h("div.dry-run", { role: "region", "aria-label": "Dry run result" },
        h("h4", null, "Dry run: " + (method === "POST" ? "grant" : "revoke") + " on " + label),
        lines.length ? h("ul", null, lines.map((l) => h("li", null, l)))
          : h("p", null, "Nothing would change."),
        h("p.hint", null, "Nothing has changed yet."), apply, " ", cancel));
    } catch (err) { result.replaceChildren(errorBox(err)); }
  };
  const grant = h("button.primary", { type: "button", onclick: preview("POST") }, "Preview grant");
  const revoke = h("button", { type: "button", onclick: preview("DELETE") }, "Preview revoke");
  return h("form.rate-form", { "aria-label": "Grant or revoke on " + label,
    onsubmit: (ev) => ev.preventDefault() },
    h("h3", null, label),
    h("div.field", null, h("label", { for: id("role") }, "Role"), role),
    h("fieldset", null, h("legend", null, "Actions"), ACTIONS.map((a, i) =>
      h("label", { for: id(a) }, boxes[i], " " + a))),
    h("p", null, grant, " ", revoke), result);
}

function grantsTable(caption, permissions) {
  return table(caption, ["Role", "Actions"],
    Object.entries(permissions).map(([r, a]) => [{ th: r }, actionsText(a)]), "grants");
}

async function viewPermissions(ctx, tenant, ns) {
  ctx.main.append(...heading("Permissions of " + tenant + "/" + ns, [["#/", "Tenants"],
    ["#/tenant/" + seg(tenant), tenant], ["#/ns/" + seg(tenant, ns), ns]]));
  const nsPath = ADMIN + "/namespaces/" + seg(tenant, ns) + "/permissions";
  const topics = (await listTopics(tenant, ns)).slice(0, MAX_LIVE_TOPICS);
  const [nsGrants, topicGrants] = await Promise.all([Api.get(nsPath), Promise.all(topics.map(
    (t) => Api.get(ADMIN + "/persistent/" + seg(tenant, ns, t.name) + "/permissions")))]);
  const reload = () => ctx.reload();
  ctx.main.append(h("p.hint", null, "A grant on the namespace covers every topic in it; a " +
    "topic's list shows the namespace's grants and its own together, as Pulsar answers."),
  grantsTable("Grants on namespace " + tenant + "/" + ns, nsGrants),
  grantForm("namespace " + tenant + "/" + ns, nsPath, nsGrants, reload));
  topics.forEach((t, i) => {
    const path = ADMIN + "/persistent/" + seg(tenant, ns, t.name) + "/permissions";
    ctx.main.append(grantsTable("Grants on topic " + t.name, topicGrants[i]),
      grantForm("topic " + t.name, path, topicGrants[i], reload));
  });
}
