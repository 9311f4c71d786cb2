/* Forms that change a dispatch rate: each write is first sent with dryRun=true, the answer is
 * compared with today's effective limits ("these 3 subscriptions would go from X to Y"), and
 * only the user's confirmation sends it for real.  A refusal shows the API's reason. */
"use strict";

/* "1,000 msg/s", "1,000 msg + 50,000 bytes per 10 s", ... for a stored DispatchRate value. */
function rateText(value) {
  if (!value) return "not set";
  const m = value.dispatchThrottlingRateInMsg, b = value.dispatchThrottlingRateInByte;
  const p = value.ratePeriodInSecond || 1;
  const parts = [];
  if (m > 0) parts.push(Fmt.num(m) + " msg");
  if (b > 0) parts.push(Fmt.num(b) + " bytes");
  if (!parts.length) return "no limit (" + m + ")";
  let text = parts.join(" + ") + (p === 1 ? "/s" : " per " + p + " s");
  if (value.relativeToPublishRate) text += " (relative to publish rate)";
  return text;
}

/* Effective limit of an entity in a provenance document: "500 msg/s" or "unlimited". */
function effectiveText(eff) {
  if (!eff) return "—";
  const parts = [];
  if (eff.msgPerSecond !== null && eff.msgPerSecond !== undefined) {
    parts.push(Fmt.limit(eff.msgPerSecond, "msg/s"));
  }
  if (eff.bytePerSecond !== null && eff.bytePerSecond !== undefined) {
    parts.push(Fmt.limit(eff.bytePerSecond, "bytes/s"));
  }
  return parts.length ? parts.join(", ") : "unlimited";
}

function topicPath(topicUrl) {
  // persistent://tenant/ns/topic -> /admin/v2/persistent/tenant/ns/topic
  const [tenant, ns, ...rest] = topicUrl.replace(/^persistent:\/\//, "").split("/");
  return ADMIN + "/persistent/" + seg(tenant, ns, rest.join("/"));
}

/* Every (label, effective) of a provenance document: the topic, then its subscriptions. */
function entities(doc) {
  const out = [{ kind: "topic", label: doc.topic, eff: doc.effective }];
  for (const [name, sub] of Object.entries(doc.subscriptions || {})) {
    out.push({ kind: "subscription", label: doc.topic + " — subscription " + name,
      eff: sub.effective });
  }
  return out;
}

const MAX_COMPARED_TOPICS = 500;

/* The dry run's topics against today's: the entities whose effective limit would change. */
async function compareDryRun(dry) {
  const changes = [];
  let unchanged = 0;
  const topics = (dry.topics || []).slice(0, MAX_COMPARED_TOPICS);
  // Today's limits of the affected topics, eight calls at a time.
  const befores = [];
  for (let i = 0; i < topics.length; i += 8) {
    befores.push(...await Promise.all(topics.slice(i, i + 8).map((t) =>
      Api.get(topicPath(t.topic) + "/effectiveDispatchRates").catch(() => null))));
  }
  topics.forEach((after, i) => {
    const before = befores[i];
    const beforeBy = new Map(before ? entities(before).map((e) => [e.label, e]) : []);
    for (const e of entities(after)) {
      const now = beforeBy.get(e.label);
      const from = now ? effectiveText(now.eff) : "—";
      const to = effectiveText(e.eff);
      if (from === to) unchanged += 1;
      else changes.push({ kind: e.kind, label: e.label, from, to });
    }
  });
  return { changes, unchanged, truncated: (dry.topics || []).length > topics.length };
}

function summarize(changes, unchanged) {
  if (!changes.length) {
    return "No effective limit would change (" + unchanged + " topics and subscriptions checked).";
  }
  const lines = [];
  for (const kind of ["subscription", "topic"]) {
    const of = changes.filter((c) => c.kind === kind);
    if (!of.length) continue;
    const noun = of.length === 1 ? kind : kind + "s";
    const froms = new Set(of.map((c) => c.from)), tos = new Set(of.map((c) => c.to));
    if (froms.size === 1 && tos.size === 1) {
      lines.push((of.length === 1 ? "This " : "These ") + of.length + " " + noun +
        " would go from " + of[0].from + " to " + of[0].to + ".");
    } else {
      lines.push((of.length === 1 ? "This " : "These ") + of.length + " " + noun +
        " would change, as listed below.");
    }
  }
  return lines.join(" ");
}

/* The dry-run / confirm / apply cycle of one write.  send(dryRun) performs the call. */
function confirmFlow(box, send, describe, onApplied) {
  box.replaceChildren(h("p", null, "Checking with a dry run…"));
  send(true).then(async (dry) => {
    const { changes, unchanged, truncated } = await compareDryRun(dry || {});
    const apply = h("button.primary", { type: "button" }, "Apply change");
    const cancel = h("button", { type: "button" }, "Cancel");
    box.replaceChildren(
      h("div.dry-run", { role: "region", "aria-label": "Dry run result" },
        h("h4", null, "Dry run: " + describe),
        h("p.summary", null, summarize(changes, unchanged)),
        truncated ? h("p", null, "Only the first " + MAX_COMPARED_TOPICS + " of the " +
          dry.topics.length + " affected topics are compared.") : null,
        changes.length ? table("Effective limits that would change",
          ["Applies to", "Now", "After the change"],
          changes.map((c) => [{ th: c.label }, c.from, c.to])) : null,
        h("p", null, "Nothing has changed yet."),
        h("div.buttons", null, apply, cancel)));
    apply.focus();
    cancel.addEventListener("click", () => box.replaceChildren(h("p", null, "Cancelled.")));
    apply.addEventListener("click", async () => {
      apply.disabled = true;
      try {
        await send(false);
        box.replaceChildren(h("p.ok", { role: "status" }, "Applied: " + describe + "."));
        announce("Applied: " + describe);
        if (onApplied) {
          flash("Applied: " + describe + ".");  // shown again at the top of the new page
          onApplied();
        }
      } catch (err) {
        showError(box, err);
      }
    });
  }).catch((err) => showError(box, err));
}

function showError(box, err) {
  const status = err.status ? " (HTTP " + err.status + ")" : "";
  box.replaceChildren(h("p.error", { role: "alert" }, "Refused" + status + ": " + err.reason));
}

let formCounter = 0;

/* A form for one DispatchRate policy at `path` (namespace, topic or subscription level). */
function rateForm(title, path, onApplied) {
  const id = "rate" + (++formCounter);
  const current = h("p.current", null, "Now: …");
  const field = (name, label, value, hint) => h("div.field", null,
    h("label", { for: id + name }, label),
    h("input", { id: id + name, name, type: "number", step: "1", value,
      "aria-describedby": hint ? id + name + "-hint" : null }),
    hint ? h("small", { id: id + name + "-hint" }, hint) : null);
  const msg = field("msg", "Messages per period", "-1", "-1 or 0: no message limit");
  const bytes = field("byte", "Bytes per period", "-1", "-1 or 0: no byte limit");
  const period = field("period", "Period (seconds)", "1");
  const relative = h("div.field.check", null,
    h("input", { id: id + "rel", type: "checkbox", name: "relative" }),
    h("label", { for: id + "rel" }, "Relative to publish rate"));
  const box = h("div.result", { "aria-live": "polite" });
  const value = (name) => Number(document.getElementById(id + name).value);
  const body = () => ({
    dispatchThrottlingRateInMsg: value("msg"),
    dispatchThrottlingRateInByte: value("byte"),
    ratePeriodInSecond: value("period"),
    relativeToPublishRate: document.getElementById(id + "rel").checked,
  });
  const preview = h("button.primary", { type: "submit" }, "Preview change");
  const remove = h("button", { type: "button" }, "Preview removal");
  const form = h("form.rate-form", { "aria-labelledby": id + "-title", novalidate: true },
    h("h3", { id: id + "-title" }, title), current,
    h("div.fields", null, msg, bytes, period, relative),
    h("div.buttons", null, preview, remove), box);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const b = body();
    confirmFlow(box, (dryRun) => Api.call("POST", path,
      { body: b, query: dryRun ? { dryRun: "true" } : null }),
      title + " set to " + rateText(b), onApplied);
  });
  remove.addEventListener("click", () => confirmFlow(box, (dryRun) => Api.call("DELETE", path,
    { query: dryRun ? { dryRun: "true" } : null }), title + " removed", onApplied));
  Api.get(path).then((v) => {
    current.textContent = "Now: " + rateText(v);
    if (v) {
      document.getElementById(id + "msg").value = v.dispatchThrottlingRateInMsg;
      document.getElementById(id + "byte").value = v.dispatchThrottlingRateInByte;
      document.getElementById(id + "period").value = v.ratePeriodInSecond;
      document.getElementById(id + "rel").checked = !!v.relativeToPublishRate;
    }
  }).catch((err) => { current.textContent = "Now: unknown (" + err.reason + ")"; });
  return form;
}

const BROKER_RATES = [
  ["dispatchThrottlingRateInMsg", "Broker limiter: messages per second (each worker)"],
  ["dispatchThrottlingRateInByte", "Broker limiter: bytes per second (each worker)"],
  ["dispatchThrottlingRatePerTopicInMsg", "Default topic rate: messages per second"],
  ["dispatchThrottlingRatePerTopicInByte", "Default topic rate: bytes per second"],
  ["dispatchThrottlingRatePerSubscriptionInMsg", "Default subscription rate: messages per second"],
  ["dispatchThrottlingRatePerSubscriptionInByte", "Default subscription rate: bytes per second"],
];

/* The broker-level dispatch rates: dynamic configuration values, with the same dry run. */
function brokerForm(values, onApplied) {
  const id = "broker" + (++formCounter);
  const select = h("select", { id: id + "name" }, BROKER_RATES.map(([name, label]) =>
    h("option", { value: name }, label + " — " + name + " (now " + (values[name] ?? "?") + ")")));
  const input = h("input", { id: id + "value", type: "number", step: "1", value: "0",
    "aria-describedby": id + "hint" });
  const box = h("div.result", { "aria-live": "polite" });
  const sync = () => { input.value = values[select.value] ?? "0"; };
  select.addEventListener("change", sync);
  sync();
  const remove = h("button", { type: "button" }, "Preview reset to default");
  const form = h("form.rate-form", { "aria-labelledby": id + "-title", novalidate: true },
    h("h3", { id: id + "-title" }, "Broker dispatch rates"),
    h("div.fields", null,
      h("div.field.wide", null, h("label", { for: id + "name" }, "Setting"), select),
      h("div.field", null, h("label", { for: id + "value" }, "New value"), input,
        h("small", { id: id + "hint" }, "0 or -1: no limit"))),
    h("div.buttons", null, h("button.primary", { type: "submit" }, "Preview change"), remove),
    box);
  const path = () => ADMIN + "/brokers/configuration/" + seg(select.value);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const name = select.value, value = input.value.trim();
    confirmFlow(box, (dryRun) => Api.call("POST", path() + "/" + seg(value),
      { query: dryRun ? { dryRun: "true" } : null }), name + " set to " + value, onApplied);
  });
  remove.addEventListener("click", () => {
    const name = select.value;
    confirmFlow(box, (dryRun) => Api.call("DELETE", path(),
      { query: dryRun ? { dryRun: "true" } : null }), name + " reset to its default", onApplied);
  });
  return form;
}
