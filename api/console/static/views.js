/* The console's pages.  Each view(ctx, ...params) fills ctx.main; ctx.every(ms, fn) refreshes
 * a part of the page while it is shown; ctx.session says what the signed-in role may do. */
"use strict";

const THROTTLE_FIELDS = [
  "dispatchThrottledMsgEventsBySubscriptionLimit", "dispatchThrottledBytesEventsBySubscriptionLimit",
  "dispatchThrottledMsgEventsByTopicLimit", "dispatchThrottledBytesEventsByTopicLimit",
  "dispatchThrottledMsgEventsByBrokerLimit", "dispatchThrottledBytesEventsByBrokerLimit",
  "dispatchThrottledMsgEventsByResourceGroupLimit",
  "dispatchThrottledBytesEventsByResourceGroupLimit",
];

/* "Throttled now": a limiter refused dispatch since the previous refresh (the stats' throttle
 * counters went up). */
const Throttle = {
  seen: new Map(),
  check(key, count) {
    const before = this.seen.get(key);
    this.seen.set(key, count);
    if (before === undefined) return null;
    return count > before;
  },
};

function throttleCount(sub) {
  return THROTTLE_FIELDS.reduce((n, f) => n + (sub[f] || 0), 0);
}

function badge(state) {
  if (state === null) return h("span.badge.unknown", null, "measuring…");
  return state ? h("span.badge.throttled", null, "Throttled now")
    : h("span.badge.ok", null, "Not throttled");
}

function link(href, text) { return h("a", { href }, text); }
function topicHref(t, ns, topic) { return "#/topic/" + seg(t, ns, topic); }

function heading(text, crumbs) {
  const nav = crumbs && crumbs.length ? h("nav.crumbs", { "aria-label": "Breadcrumb" },
    h("ol", null, crumbs.map(([href, label]) => h("li", null, link(href, label))))) : null;
  document.title = text + " — Sluice console";
  return nav ? [nav, h("h1", null, text)] : [h("h1", null, text)];
}

function errorBox(err) {
  return h("p.error", { role: "alert" }, "The API refused" +
    (err.status ? " (HTTP " + err.status + ")" : "") + ": " + err.reason);
}

/* Stats of a topic, partitioned or not, with a fallback when a topic has none yet. */
async function topicStats(base, partitioned) {
  return Api.get(base + (partitioned ? "/partitioned-stats" : "/stats"));
}

function subSummary(s) {
  return {
    rateOut: s.msgRateOut || 0,
    backlog: s.msgBacklog || 0,
    consumers: (s.consumers || []).length,
    unacked: s.unackedMessages || 0,
    throttles: throttleCount(s),
    type: s.type || "—",
  };
}

function topicSummary(stats) {
  const subs = Object.values(stats.subscriptions || {}).map(subSummary);
  return {
    rateIn: stats.msgRateIn || 0,
    rateOut: stats.msgRateOut || 0,
    backlog: subs.reduce((n, s) => n + s.backlog, 0),
    consumers: subs.reduce((n, s) => n + s.consumers, 0),
    throttles: subs.reduce((n, s) => n + s.throttles, 0),
    subscriptions: subs.length,
  };
}

/* ---- Tenants ------------------------------------------------------------------------------ */

async function viewHome(ctx) {
  ctx.main.append(...heading("Tenants"));
  if (ctx.session.mode === "tenant") {
    const mine = ctx.session.tenants;
    ctx.main.append(h("p", null, mine.length
      ? "Signed in as a tenant admin: these are the tenants you administer."
      : "Signed in as a tenant admin of no tenant yet: a super-user adds your role to a " +
        "tenant's admin roles."));
    if (mine.length) ctx.main.append(await tenantsTable(mine));
    return;
  }
  const list = h("div");
  ctx.main.append(list);
  const refresh = async () => {
    list.replaceChildren(await tenantsTable());
  };
  await refresh();
  ctx.every(10000, refresh);
}

async function tenantsTable(only) {
  const tenants = only || await Api.get(ADMIN + "/tenants");
  const rows = await Promise.all(tenants.map(async (t) => {
    const [info, namespaces] = await Promise.all([
      Api.get(ADMIN + "/tenants/" + seg(t)).catch(() => ({})),
      Api.get(ADMIN + "/namespaces/" + seg(t)).catch(() => []),
    ]);
    return [{ th: link("#/tenant/" + seg(t), t) }, (info.adminRoles || []).join(", ") || "—",
      h("span", null, namespaces.length ? namespaces.map((n, i) => [i ? ", " : "",
        link("#/ns/" + seg(...n.split("/")), n.split("/")[1])]) : "none")];
  }));
  return table("Tenants", ["Tenant", "Admin roles", "Namespaces"], rows);
}

async function viewTenant(ctx, tenant) {
  ctx.main.append(...heading("Tenant " + tenant, [["#/", "Tenants"]]));
  const namespaces = await Api.get(ADMIN + "/namespaces/" + seg(tenant));
  const rows = await Promise.all(namespaces.map(async (full) => {
    const ns = full.split("/")[1];
    const topics = await Api.get(ADMIN + "/persistent/" + seg(tenant, ns) + "/partitioned")
      .catch(() => []);
    const plain = await Api.get(ADMIN + "/persistent/" + seg(tenant, ns)).catch(() => []);
    const count = topics.length + plain.filter((t) => !/-partition-\d+$/.test(t)).length;
    return [{ th: link("#/ns/" + seg(tenant, ns), ns) }, Fmt.int(count),
      link("#/reports/" + seg(tenant, ns), "Reports"),
      link("#/permissions/" + seg(tenant, ns), "Permissions")];
  }));
  ctx.main.append(table("Namespaces of " + tenant, ["Namespace", "Topics", "Reports",
    "Permissions"], rows));
}

/* ---- Namespace: its topics, live -------------------------------------------------------- */

const MAX_LIVE_TOPICS = 100;  // stats calls per refresh stay bounded

async function listTopics(tenant, ns) {
  const base = ADMIN + "/persistent/" + seg(tenant, ns);
  const [partitioned, all] = await Promise.all([Api.get(base + "/partitioned"), Api.get(base)]);
  const short = (url) => url.split("/").slice(4).join("/");
  const topics = partitioned.map((u) => ({ name: short(u), partitioned: true }));
  for (const u of all) {
    if (/-partition-\d+$/.test(u) && partitioned.some((p) => u.startsWith(p + "-partition-"))) {
      continue;
    }
    topics.push({ name: short(u), partitioned: false });
  }
  topics.sort((a, b) => a.name.localeCompare(b.name));
  return topics;
}

async function viewNamespace(ctx, tenant, ns) {
  ctx.main.append(...heading("Namespace " + tenant + "/" + ns,
    [["#/", "Tenants"], ["#/tenant/" + seg(tenant), tenant]]));
  ctx.main.append(h("p", null, link("#/reports/" + seg(tenant, ns), "Rate and backlog reports"),
    ", ", link("#/advice/" + seg(tenant, ns), "limit advice"),
    " and ", link("#/permissions/" + seg(tenant, ns), "permissions"), " of this namespace."));
  let topics = await listTopics(tenant, ns);
  const live = h("div");
  ctx.main.append(h("section", { "aria-labelledby": "topics-h" },
    h("h2", { id: "topics-h" }, "Topics"),
    h("p.hint", null, "Live figures, refreshed every few seconds."), live));
  let first = true;
  const refresh = async () => {
    if (!first) topics = await listTopics(tenant, ns);  // topics created since show up
    first = false;
    const shown = topics.slice(0, MAX_LIVE_TOPICS);
    const rows = await Promise.all(shown.map(async (t) => {
      const base = ADMIN + "/persistent/" + seg(tenant, ns, t.name);
      let s = null;
      try { s = topicSummary(await topicStats(base, t.partitioned)); } catch (_) { s = null; }
      const state = s ? Throttle.check("t:" + tenant + "/" + ns + "/" + t.name, s.throttles)
        : null;
      return [{ th: link(topicHref(tenant, ns, t.name), t.name) },
        t.partitioned ? "partitioned" : "single",
        s ? Fmt.rate(s.rateIn) : "—", s ? Fmt.rate(s.rateOut) : "—",
        s ? Fmt.int(s.backlog) : "—", s ? Fmt.int(s.subscriptions) : "—",
        s ? Fmt.int(s.consumers) : "—", s ? badge(state) : "—"];
    }));
    const more = topics.length > shown.length ? " — the first " + shown.length + " of " +
      topics.length + ", live" : " (live)";
    live.replaceChildren(table("Topics of " + tenant + "/" + ns + more,
      ["Topic", "Kind", "Msg rate in (msg/s)", "Msg rate out (msg/s)", "Backlog (msgs)",
        "Subscriptions", "Consumers", "Throttled"], rows, "live stack"));
  };
  await refresh();
  ctx.after(1000, refresh);  // a second sample soon: the throttle badge needs two
  ctx.every(3000, refresh);
  const reload = () => ctx.reload();
  const path = ADMIN + "/namespaces/" + seg(tenant, ns);
  ctx.main.append(h("section", { "aria-labelledby": "ns-rates-h" },
    h("h2", { id: "ns-rates-h" }, "Change dispatch rates"),
    h("div.forms", null,
      rateForm("Namespace dispatch rate", path + "/dispatchRate", reload),
      rateForm("Namespace subscription dispatch rate", path + "/subscriptionDispatchRate",
        reload))));
}

/* ---- Topic: live stats, provenance, ownership, rate forms ------------------------------- */

const MAX_SUBSCRIPTION_FORMS = 6;
const LEVEL_COLUMNS = ["subscription", "topic", "namespace", "broker"];
const LIMITER_LABELS = {
  broker: "broker limiter",
  topic: "topic limiter",
  subscriptionDefault: "subscription limiter (default for subscriptions)",
  subscription: "subscription limiter",
};

function limiterRow(appliesTo, name, limiter) {
  const by = new Map((limiter.levels || []).map((l) => [l.level, l]));
  const cells = LEVEL_COLUMNS.map((level) => {
    const l = by.get(level);
    if (!l) return h("span.na", null, "—");
    const text = l.set ? rateText(l.value) : "not set";
    if (limiter.source === level) {
      return h("span.won", null, text, " ", h("strong", null, "(wins)"));
    }
    return l.set ? text : h("span.na", null, text);
  });
  return [{ th: appliesTo }, LIMITER_LABELS[name] || name, ...cells,
    limiter.source || "—", limiter.enabled ? rateText(limiter.value) : "no limit"];
}

function winner(doc, eff, own) {
  if (!eff || !eff.msgLimiter && !eff.byteLimiter) return ["none", "—"];
  const name = eff.msgLimiter || eff.byteLimiter;
  const limiter = name === "subscription" && own ? own : doc.limiters[name];
  return [LIMITER_LABELS[name] || name, limiter ? limiter.source : "—"];
}

function provenanceSection(doc) {
  const per = doc.appliesPer === "partition" && doc.partitions > 0
    ? "Limits apply to each of the " + doc.partitions + " partitions (per partition)."
    : "Limits apply per " + (doc.appliesPer || "topic") + ".";
  const summaryRows = [];
  const [tl, tlevel] = winner(doc, doc.effective, null);
  summaryRows.push([{ th: "Topic " + doc.topic.split("/").slice(4).join("/") },
    h("strong", null, effectiveText(doc.effective)), tl, tlevel]);
  const detailRows = [];
  for (const name of ["broker", "topic", "subscriptionDefault"]) {
    if (doc.limiters[name]) detailRows.push(limiterRow("Topic", name, doc.limiters[name]));
  }
  for (const [sub, s] of Object.entries(doc.subscriptions || {})) {
    const [wl, wlevel] = winner(doc, s.effective, s.subscription);
    summaryRows.push([{ th: "Subscription " + sub }, h("strong", null, effectiveText(s.effective)),
      wl, wlevel]);
    if (s.subscription) {
      detailRows.push(limiterRow("Subscription " + sub, "subscription", s.subscription));
    }
  }
  return h("section", { "aria-labelledby": "prov-h" },
    h("h2", { id: "prov-h" }, "Effective dispatch limits"),
    h("p.hint", null, per + " The lowest enabled limiter wins; within a limiter the most " +
      "specific level that is set wins."),
    table("Effective limit per topic and subscription",
      ["Applies to", "Effective limit", "Winning limiter", "Winning level"], summaryRows,
      "provenance stack"),
    table("Every limiter, level by level",
      ["Applies to", "Limiter", "Subscription level", "Topic level", "Namespace level",
        "Broker level", "Level in force", "Limiter's value"], detailRows, "levels stack"));
}

async function viewTopic(ctx, tenant, ns, topic) {
  const base = ADMIN + "/persistent/" + seg(tenant, ns, topic);
  ctx.main.append(...heading("Topic " + topic, [["#/", "Tenants"],
    ["#/tenant/" + seg(tenant), tenant], ["#/ns/" + seg(tenant, ns), ns]]));
  ctx.main.append(h("p.topic-url", null, "persistent://" + tenant + "/" + ns + "/" + topic));
  const meta = await Api.get(base + "/partitions").catch(() => ({ partitions: 0 }));
  const partitioned = (meta.partitions || 0) > 0;
  const subs = await Api.get(base + "/subscriptions");
  const live = h("div");
  ctx.main.append(h("section", { "aria-labelledby": "live-h" },
    h("h2", { id: "live-h" }, "Live"),
    h("p.hint", null, "Refreshed every few seconds."), live));
  const refresh = async () => {
    let stats;
    try { stats = await topicStats(base, partitioned); } catch (err) {
      live.replaceChildren(errorBox(err));
      return;
    }
    const s = topicSummary(stats);
    const key = "t:" + tenant + "/" + ns + "/" + topic;
    const topicRow = [[{ th: topic }, partitioned ? String(meta.partitions) : "—",
      Fmt.rate(s.rateIn), Fmt.rate(s.rateOut), Fmt.int(s.backlog), Fmt.int(s.consumers),
      badge(Throttle.check(key, s.throttles))]];
    const subRows = Object.entries(stats.subscriptions || {}).sort().map(([name, raw]) => {
      const ss = subSummary(raw);
      return [{ th: name }, ss.type, Fmt.rate(ss.rateOut), Fmt.int(ss.backlog),
        Fmt.int(ss.unacked), Fmt.int(ss.consumers), badge(Throttle.check(key + "#" + name,
          ss.throttles))];
    });
    // Subscriptions that saw message priorities: one row per priority, highest first.
    const levelRows = [];
    for (const [name, raw] of Object.entries(stats.subscriptions || {}).sort()) {
      for (const [level, l] of Object.entries(raw.priorityLevels || {})) {
        levelRows.push([{ th: name }, level, Fmt.rate(l.msgRateOut), Fmt.int(l.msgBacklog),
          Fmt.int(l.msgOutCounter)]);
      }
    }
    live.replaceChildren(
      table("Topic (live)", ["Topic", "Partitions", "Msg rate in (msg/s)",
        "Msg rate out (msg/s)", "Backlog (msgs)", "Consumers", "Throttled"], topicRow, "live stack"),
      table("Subscriptions (live)", ["Subscription", "Type", "Msg rate out (msg/s)",
        "Backlog (msgs)", "Unacked", "Consumers", "Throttled"], subRows, "live stack"),
      ...(levelRows.length ? [table("Priority levels (live)", ["Subscription", "Priority",
        "Msg rate out (msg/s)", "Waiting (msgs)", "Dispatched (msgs)"], levelRows,
        "live stack")] : []));
  };
  await refresh();
  ctx.after(1000, refresh);  // a second sample soon: the throttle badge needs two
  ctx.every(3000, refresh);
  try {
    ctx.main.append(provenanceSection(await Api.get(base + "/effectiveDispatchRates")));
  } catch (err) {
    ctx.main.append(h("h2", null, "Effective dispatch limits"), errorBox(err));
  }
  const owners = h("div");
  ctx.main.append(h("section", { "aria-labelledby": "own-h" },
    h("h2", { id: "own-h" }, "Partition ownership"), owners));
  Api.get(base + "/lookup").then((lookup) => {
    const entries = lookup.owner !== undefined ? [[ "persistent://" + tenant + "/" + ns + "/" +
      topic, lookup]] : Object.entries(lookup);
    owners.replaceChildren(table("Which worker dispatches each partition",
      ["Partition", "Owner (worker)", "Lease token"],
      entries.map(([p, l]) => [{ th: p }, l.owner || "—", l.leaseToken || "—"])));
  }).catch((err) => owners.replaceChildren(h("p", null, "No owner: " + err.reason)));
  const reload = () => ctx.reload();
  const forms = h("div.forms", null,
    rateForm("Topic dispatch rate", base + "/dispatchRate", reload),
    rateForm("Topic subscription dispatch rate", base + "/subscriptionDispatchRate", reload));
  const subForm = (sub) => rateForm("Dispatch rate of subscription " + sub, base + "/" +
    seg(sub) + "/dispatchRate", reload);
  if (subs.length <= MAX_SUBSCRIPTION_FORMS) {
    for (const sub of subs) forms.append(subForm(sub));
  } else {
    // Many subscriptions: one form, for the subscription chosen.
    const holder = h("div");
    const select = h("select", { id: "sub-choice" }, subs.map((s) => h("option", { value: s },
      s)));
    select.addEventListener("change", () => holder.replaceChildren(subForm(select.value)));
    holder.append(subForm(subs[0]));
    forms.append(h("div", null, h("div.field", null,
      h("label", { for: "sub-choice" }, "Subscription whose own rate to change"), select),
    holder));
  }
  ctx.main.append(h("section", { "aria-labelledby": "rates-h" },
    h("h2", { id: "rates-h" }, "Change dispatch rates"), forms));
}

/* ---- Broker rates --------------------------------------------------------------------- */

async function viewBroker(ctx) {
  ctx.main.append(...heading("Broker dispatch rates"));
  const values = await Api.get(ADMIN + "/brokers/configuration/values");
  ctx.main.append(h("p.hint", null, "Dynamic broker settings: the last level of every " +
    "limiter, applied to every topic that sets nothing closer."),
    brokerForm(values, () => ctx.reload()));
}

/* ---- Reports ---------------------------------------------------------------------------- */

function selectField(id, label, options, value) {
  return h("div.field", null, h("label", { for: id }, label),
    h("select", { id, name: id }, options.map(([v, text]) =>
      h("option", { value: v, selected: v === value }, text))));
}

async function viewReports(ctx, tenant, ns) {
  ctx.main.append(...heading("Reports of " + tenant + "/" + ns, [["#/", "Tenants"],
    ["#/tenant/" + seg(tenant), tenant], ["#/ns/" + seg(tenant, ns), ns]]));
  const q = ctx.query;
  const window = q.get("window") || "minute", since = q.get("since") || "1h";
  const topics = await listTopics(tenant, ns).catch(() => []);
  const form = h("form.inline.pickers", { "aria-label": "Report range" },
    selectField("window", "Window", [["minute", "Minute"], ["hour", "Hour"], ["day", "Day"]],
      window),
    selectField("since", "Time range", [["15m", "Last 15 minutes"], ["1h", "Last hour"],
      ["6h", "Last 6 hours"], ["1d", "Last day"], ["7d", "Last 7 days"],
      ["30d", "Last 30 days"]], since),
    selectField("topic", "Topic", [["", "All topics"], ...topics.map((t) => [t.name, t.name])],
      q.get("topic") || ""),
    h("button.primary", { type: "submit" }, "Show"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const params = new URLSearchParams();
    for (const k of ["window", "since", "topic"]) {
      const v = document.getElementById(k).value;
      if (v) params.set(k, v);
    }
    location.hash = "#/reports/" + seg(tenant, ns) + "?" + params.toString();
  });
  ctx.main.append(form);
  if (ctx.session.mode !== "tenant") {
    ctx.main.append(h("p", null, link("#/runs", "Report runs"), " (when each report was made)."));
  }
  const query = { window, since, topic: q.get("topic") || null, limit: 5000 };
  const base = ADMIN + "/reports/";
  const [rates, backlog] = await Promise.all([
    Api.get(base + "rates/" + seg(tenant, ns), query),
    Api.get(base + "backlog/" + seg(tenant, ns), query),
  ]);
  const keyOf = (r) => r.topic + " — " + r.subscription;
  const keys = [...new Set([...rates, ...backlog].map(keyOf))].sort();
  if (!keys.length) {
    ctx.main.append(h("p.empty", null, "No report rows in this range yet: reports are made " +
      "on a schedule from the workers' stats."));
    return;
  }
  for (const key of keys) {
    const r = rates.filter((x) => keyOf(x) === key)
      .sort((a, b) => a.windowStart.localeCompare(b.windowStart));
    const b = backlog.filter((x) => keyOf(x) === key)
      .sort((a, c) => a.windowStart.localeCompare(c.windowStart));
    const at = (x) => new Date(x.windowStart);
    const section = h("section.report", null, h("h2", null, key));
    // Rates are the topic's, its partitions summed: so is the limit drawn against them, the
    // effective one (the limiter that bound, topic or subscription or broker) of one
    // partition times the topic's partitions, asleep ones included (a sleeping partition
    // reports nothing, yet may dispatch as much).
    const limited = [...r].reverse().find((x) => x.limitPerPartitionAvg !== null);
    const parts = Math.max(1, ...r.map((x) => x.partitions || 1));
    const limitName = "limit in force" + (parts > 1 ? ", " + parts + " partitions summed" : "");
    const summed = (x) => x.limitPerPartitionAvg === null ? null : x.limitPerPartitionAvg * parts;
    section.append(lineChart("Dispatch rate vs limit, " + key, [
      { name: "average rate", points: r.map((x) => [at(x), x.avgRate]) },
      { name: "p95 rate", points: r.map((x) => [at(x), x.p95Rate]) },
      { name: limitName, dashed: true, points: r.map((x) => [at(x), summed(x)]) },
    ], { unit: "msg/s" }));
    if (limited) section.append(h("p.limit-note", null, limitNote(limited, parts)));
    section.append(lineChart("Backlog, " + key, [
      { name: "backlog at window end", points: b.map((x) => [at(x), x.backlogMsgs]) },
      { name: "largest backlog in window", points: b.map((x) => [at(x), x.maxBacklogMsgs]) },
    ], { unit: "msgs" }));
    // The latest backlog: the last point of the chart above, and what the estimate is of.
    const last = [...b].reverse().find((x) => x.backlogMsgs !== null && x.backlogMsgs !== undefined);
    if (last) section.append(h("p.drain", null, h("strong", null, "Drain estimate: "),
      drainText(last)));
    ctx.main.append(section);
  }
}

/* What limited a subscription's dispatch in its latest limited window, per partition and for
   the topic (the figure the chart draws). */
function limitNote(row, parts) {
  const limiter = row.limitLimiter ? row.limitLimiter + " limiter" : "limit";
  const source = row.limitSource ? ", set on the " + row.limitSource : "";
  const perPartition = Fmt.rate(row.limitPerPartitionAvg) + " msg/s per partition";
  const total = parts > 1 ? " × " + parts + " partitions = " +
    Fmt.rate(row.limitPerPartitionAvg * parts) + " msg/s for the topic" : "";
  return "Limit in force (window " + Fmt.time(row.windowStart) + "): the " + limiter + source +
    ", " + perPartition + total + ".";
}

/* The drain estimate of a backlog report row, with the backlog it is about. */
function drainText(row) {
  const waiting = row.backlogMsgs;
  let estimate;
  if (!(waiting > 0)) estimate = "no backlog";
  else if (row.drainStatus === "never") estimate = "never drains at the current rates";
  else if (row.drainSeconds >= 1) estimate = "drains in about " + Fmt.duration(row.drainSeconds);
  else if (row.drainSeconds !== null && row.drainSeconds !== undefined) {
    estimate = "drains in under a second";
  } else estimate = "no estimate";
  return estimate + " (backlog " + Fmt.int(waiting) + " msgs at the end of the window from " +
    Fmt.time(row.windowStart) + ", growing " + Fmt.rate(row.growthPerS) + " msg/s, drain rate " +
    Fmt.rate(row.drainRate) + " msg/s).";
}

async function viewRuns(ctx) {
  ctx.main.append(...heading("Report runs"));
  const box = h("div.result", { "aria-live": "polite" });
  const start = h("button.primary", { type: "button" }, "Start a run now");
  start.addEventListener("click", async () => {
    start.disabled = true;
    try {
      const queued = await Api.call("POST", ADMIN + "/reports/runs", { body: {} });
      box.replaceChildren(h("p.ok", null, "Queued runs " + queued.runIds.join(", ") + "."));
      ctx.reload();
    } catch (err) { showError(box, err); start.disabled = false; }
  });
  ctx.main.append(h("div.buttons", null, start), box);
  const list = h("div");
  ctx.main.append(list);
  const refresh = async () => {
    const runs = await Api.get(ADMIN + "/reports/runs");
    list.replaceChildren(table("Report runs, newest first", ["Run", "Job", "Status", "Queued",
      "Started", "Finished", "Data until", "Rows", "Attempt", "Error"], runs.map((r) => [
      { th: String(r.id) }, r.job, h("span.status-" + r.status, null, r.status),
      Fmt.time(r.queuedAt), Fmt.time(r.startedAt), Fmt.time(r.finishedAt),
      Fmt.time(r.dataUntil), Fmt.int(r.rows), String(r.attempt), r.error || "—"])));
  };
  await refresh();
  ctx.every(5000, refresh);
}

/* ---- Audit log and fleet ------------------------------------------------------------------ */

async function viewAudit(ctx) {
  ctx.main.append(...heading("Audit log"));
  const q = ctx.query;
  const text = (id, label, hint) => h("div.field", null, h("label", { for: id }, label),
    h("input", { id, name: id, value: q.get(id) || "", placeholder: hint || null }));
  const when = (id, label) => h("div.field", null, h("label", { for: id }, label + " (UTC)"),
    h("input", { id, name: id, type: "datetime-local",
      value: (q.get(id) || "").replace(/Z$/, "").slice(0, 16) }));
  const form = h("form.inline.pickers", { "aria-label": "Filter the audit log" },
    text("entityPrefix", "Entity (prefix)", "persistent://acme/orders"),
    text("entityType", "Entity type", "topic.dispatchRate"),
    text("role", "Role"), when("since", "Since"), when("until", "Until"),
    h("button.primary", { type: "submit" }, "Filter"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const params = new URLSearchParams();
    for (const k of ["entityPrefix", "entityType", "role"]) {
      const v = document.getElementById(k).value.trim();
      if (v) params.set(k, v);
    }
    for (const k of ["since", "until"]) {
      const v = document.getElementById(k).value;
      if (v) params.set(k, v + ":00Z");
    }
    location.hash = "#/audit?" + params.toString();
  });
  ctx.main.append(form);
  const query = { limit: 200 };
  for (const k of ["entityPrefix", "entityType", "role", "since", "until"]) {
    if (q.get(k)) query[k] = q.get(k);
  }
  const entries = await Api.get(ADMIN + "/audit", query);
  const change = (e) => {
    const fields = changedFields(e.before, e.after);
    if (!fields.length) return "no change";
    return h("ul.changes", null, ...fields.map(([name, old, now]) => h("li", null,
      h("code", null, name), ": ", h("del", null, Fmt.value(old)), " → ",
      h("ins", null, Fmt.value(now)))));
  };
  ctx.main.append(table("Changes, newest first (" + Fmt.int(entries.length) + ")",
    ["Time", "Role", "Action", "Entity type", "Entity", "Fields changed (old → new)"],
    entries.map((e) => [Fmt.time(e.at), e.role, e.action, e.entityType, { th: e.entity },
      change(e)]), "audit stack"));
}

async function viewFleet(ctx) {
  ctx.main.append(...heading("Worker fleet"));
  const clusters = await Api.get(ADMIN + "/clusters");
  const live = h("div");
  ctx.main.append(live);
  const refresh = async () => {
    const parts = [];
    for (const cluster of clusters) {
      const workers = await Api.get(ADMIN + "/brokers/" + seg(cluster) + "/workers");
      parts.push(table("Workers of cluster " + cluster + " (" + workers.length + " live)",
        ["Worker", "Host", "Started", "Owned partitions", "HTTP"],
        workers.map((w) => [{ th: w.id }, w.host || "—",
          Fmt.time(new Date(w.startedAt).toISOString()), Fmt.int(w.ownedPartitions),
          w.httpUrl || "—"])));
    }
    live.replaceChildren(...parts);
  };
  await refresh();
  ctx.every(5000, refresh);
  // Partition ownership: which worker owns each partition, over the first topics found.
  const owners = [];
  const MAX_TOPICS = 50;
  let seen = 0;
  outer: for (const tenant of await Api.get(ADMIN + "/tenants")) {
    for (const full of await Api.get(ADMIN + "/namespaces/" + seg(tenant))) {
      const ns = full.split("/")[1];
      for (const t of await listTopics(tenant, ns).catch(() => [])) {
        if (++seen > MAX_TOPICS) break outer;
        const url = "persistent://" + tenant + "/" + ns + "/" + t.name;
        try {
          const lookup = await Api.get(ADMIN + "/persistent/" + seg(tenant, ns, t.name) +
            "/lookup");
          const entries = lookup.owner !== undefined ? [[url, lookup]] : Object.entries(lookup);
          for (const [p, l] of entries) {
            owners.push([{ th: link(topicHref(tenant, ns, t.name), p) }, l.owner || "—",
              l.leaseToken || "—"]);
          }
        } catch (err) {
          owners.push([{ th: url }, "none (" + err.reason + ")", "—"]);
        }
      }
    }
  }
  ctx.main.append(h("h2", null, "Partition ownership"), table(
    "Owner of each partition" + (seen > MAX_TOPICS ? " (first " + MAX_TOPICS + " topics)" : ""),
    ["Partition", "Owner (worker)", "Lease token"], owners));
}

/* ---- Resource groups ---------------------------------------------------------------------- */

/* Every resource group: its rates (-1 = unlimited) and the tenants, namespaces and topics
 * attached, with their weights in the group's fair split (docs/resource-groups.md). */
async function viewResourceGroups(ctx) {
  ctx.main.append(...heading("Resource groups"));
  const names = await Api.get(ADMIN + "/resourcegroups");
  const rate = (value) => (value > 0 ? Fmt.int(value) + "/s" : "unlimited");
  const rows = [];
  for (const name of names) {
    const group = await Api.get(ADMIN + "/resourcegroups/" + seg(name));
    const members = await Api.get(ADMIN + "/resourcegroups/" + seg(name) + "/attachments");
    rows.push([{ th: name }, rate(group.dispatchRateInMsgs), rate(group.dispatchRateInBytes),
      rate(group.publishRateInMsgs), rate(group.publishRateInBytes),
      members.length ? members.map((m) => m.level + " " + m.name + " (weight " + m.weight +
        ")").join(", ") : "none"]);
  }
  ctx.main.append(table("Resource groups and their members", ["Group", "Dispatch msgs",
    "Dispatch bytes", "Publish msgs", "Publish bytes", "Attached"], rows));
}
