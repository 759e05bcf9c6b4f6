// Dray's web UI: the little JavaScript it needs, no framework.
// - Action buttons open the confirmation dialog (#confirm), whose body the server renders.
// - #confirm-go calls the JSON API with the session cookie and the CSRF token.
// - Server-sent events (/ui/events) tell the page to re-fetch what it shows.
// - The pipeline graph is re-stacked with the node heights the browser measured.
"use strict";

(function () {
  const csrfMeta = document.querySelector('meta[name="csrf-token"]');
  const csrf = csrfMeta ? csrfMeta.content : "";
  const project = document.body.dataset.project || "";

  function selectedFreight() {
    const live = document.getElementById("live");
    return live ? live.dataset.selected || "" : "";
  }

  function text(el, value) {
    el.textContent = value;
  }

  async function fetchText(url) {
    const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "text/html", "X-Dray-Fragment": "1" } });
    if (response.status === 401) {
      location.assign("/login");
    }
    const body = await response.text();
    return { ok: response.ok, status: response.status, body: body };
  }

  // ---- the pipeline graph: boxes as tall as their content ----
  // graph.rs stacks each column from estimated heights; here the measured ones are used
  // (same margin and gap, carried by the .graph element) and the edges redrawn to meet
  // each box at its middle, as graph.rs draws them.
  function relayout() {
    const graph = document.querySelector(".graph");
    if (!graph) return;
    const margin = Number(graph.dataset.margin) || 16;
    const gap = Number(graph.dataset.gap) || 20;
    const nodes = Array.from(graph.querySelectorAll(".node[data-node]")).map(function (el) {
      return {
        el: el,
        index: el.dataset.node,
        layer: Number(el.dataset.layer),
        row: Number(el.dataset.row),
        left: el.offsetLeft,
        width: el.offsetWidth,
        height: el.offsetHeight,
        top: 0,
      };
    });
    nodes.sort(function (a, b) {
      return a.layer - b.layer || a.row - b.row;
    });
    const byIndex = {};
    let column = null;
    let next = margin;
    let bottom = margin;
    for (const n of nodes) {
      if (n.layer !== column) {
        column = n.layer;
        next = margin;
      }
      n.top = next;
      next += n.height + gap;
      bottom = Math.max(bottom, n.top + n.height);
      byIndex[n.index] = n;
    }
    for (const n of nodes) n.el.style.top = n.top + "px";
    const height = bottom + margin;
    graph.style.height = height + "px";
    const svg = graph.querySelector("svg.edges");
    if (svg) svg.setAttribute("height", String(height));
    for (const path of graph.querySelectorAll("path[data-from]")) {
      const a = byIndex[path.dataset.from];
      const b = byIndex[path.dataset.to];
      if (!a || !b) continue;
      const x1 = a.left + a.width;
      const y1 = Math.round(a.top + a.height / 2);
      const x2 = b.left;
      const y2 = Math.round(b.top + b.height / 2);
      const bend = Math.max(0, Math.floor((x2 - x1) / 2));
      path.setAttribute(
        "d",
        x2 > x1
          ? "M" + x1 + "," + y1 + " C" + (x1 + bend) + "," + y1 + " " + (x2 - bend) + "," + y2 + " " + x2 + "," + y2
          : "M" + x1 + "," + y1 + " L" + x2 + "," + y2,
      );
    }
  }

  // ---- the confirmation dialog ----
  const dialog = document.getElementById("confirm");
  let pending = null; // { url, body, action }

  function showError(message, details) {
    const box = document.getElementById("confirm-error");
    if (!box) return;
    box.replaceChildren();
    const p = document.createElement("p");
    text(p, message);
    box.appendChild(p);
    if (Array.isArray(details) && details.length) {
      const ul = document.createElement("ul");
      ul.className = "reasons";
      for (const d of details) {
        const li = document.createElement("li");
        text(li, typeof d === "string" ? d : JSON.stringify(d));
        ul.appendChild(li);
      }
      box.appendChild(ul);
    }
  }

  async function openConfirm(action, stage, freightOf) {
    if (!dialog) return;
    const go = document.getElementById("confirm-go");
    const content = dialog.querySelector(".confirm-body");
    document.getElementById("confirm-error").replaceChildren();
    go.disabled = true;
    pending = null;
    const params = new URLSearchParams({ action: action });
    const freight = freightOf || selectedFreight();
    if (freight) params.set("freight", freight);
    // Without a Stage, the project-wide levers' dialog (freeze the project, reject everywhere).
    const url = stage
      ? "/projects/" + encodeURIComponent(project) + "/stages/" + encodeURIComponent(stage) + "/confirm?" + params
      : "/projects/" + encodeURIComponent(project) + "/confirm?" + params;
    content.textContent = "Loading…";
    if (!dialog.open) dialog.showModal();
    const answer = await fetchText(url);
    if (!answer.ok) {
      content.replaceChildren();
      const doc = new DOMParser().parseFromString(answer.body, "text/html");
      const message = doc.querySelector(".message");
      showError(message ? message.textContent : "the server answered " + answer.status, []);
      return;
    }
    content.innerHTML = answer.body; // server-rendered, escaped by maud
    const call = content.querySelector("#confirm-call");
    if (call && !call.dataset.refused) {
      pending = { url: call.dataset.url, body: call.dataset.body, action: action };
      go.disabled = false;
      // Through a closed window, Confirm waits for the reason the override is kept with.
      const override = content.querySelector("#confirm-override[data-required]");
      if (override) {
        const needReason = function () {
          go.disabled = !override.value.trim();
        };
        needReason();
        override.addEventListener("input", needReason);
      }
    }
  }

  async function confirmGo() {
    if (!pending) return;
    const go = document.getElementById("confirm-go");
    go.disabled = true;
    let body = JSON.parse(pending.body || "{}");
    const reason = document.getElementById("confirm-reason");
    if (reason) {
      if (reason.required && !reason.value.trim()) {
        showError("say why", []);
        go.disabled = false;
        return;
      }
      if (reason.value.trim()) body.reason = reason.value.trim();
    }
    const until = document.getElementById("confirm-until");
    if (until && until.value.trim()) {
      body.until = until.value.trim();
    }
    const override = document.getElementById("confirm-override");
    if (override && override.value.trim()) {
      body.overrideWindow = override.value.trim();
    }
    let response;
    try {
      response = await fetch(pending.url, {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf, Accept: "application/json" },
        body: JSON.stringify(body),
      });
    } catch (e) {
      showError("the server could not be reached: " + e, []);
      go.disabled = false;
      return;
    }
    let json = null;
    try {
      json = await response.json();
    } catch (e) {
      json = null;
    }
    if (!response.ok) {
      const error = (json && json.error) || {};
      let message = error.message || "the server answered " + response.status;
      if (error.hint) message += " (" + error.hint + ")";
      showError(message, error.details || []);
      go.disabled = false;
      return;
    }
    const action = pending.action;
    pending = null;
    dialog.close();
    if (action === "promote" && json && json.metadata && json.metadata.name) {
      await showPromotion(json.metadata.name);
    }
    refresh();
  }

  // ---- the live Promotion view ----
  let watched = null;

  async function showPromotion(name) {
    watched = name;
    const slot = document.getElementById("promotion-slot");
    if (!slot) return;
    slot.dataset.promotion = name;
    const answer = await fetchText("/projects/" + encodeURIComponent(project) + "/promotions/" + encodeURIComponent(name) + "/view");
    if (answer.ok && watched === name) slot.innerHTML = answer.body;
  }

  // ---- live updates ----
  let refreshing = false;
  let again = false;
  let lastLive = null;

  async function refresh() {
    if (refreshing) {
      again = true;
      return;
    }
    refreshing = true;
    try {
      const live = document.getElementById("live");
      if (live) {
        const answer = await fetchText(location.pathname.replace(/\/$/, "") + "/live" + location.search);
        if (answer.ok && lastLive !== answer.body) {
          live.innerHTML = answer.body;
          lastLive = answer.body;
          relayout();
        }
      }
      const slot = document.getElementById("promotion-slot");
      if (slot && slot.dataset.promotion) await showPromotion(slot.dataset.promotion);
    } finally {
      refreshing = false;
      if (again) {
        again = false;
        refresh();
      }
    }
  }

  document.addEventListener("click", function (event) {
    const button = event.target.closest("button[data-action]");
    if (button && !button.disabled) {
      event.preventDefault();
      openConfirm(button.dataset.action, button.dataset.stage, button.dataset.freight);
      return;
    }
    if (event.target.closest("#confirm-go")) {
      event.preventDefault();
      confirmGo();
    } else if (event.target.closest("#confirm-cancel")) {
      event.preventDefault();
      pending = null;
      dialog.close();
    }
  });

  relayout();

  if (project && window.EventSource) {
    const events = new EventSource("/ui/events?project=" + encodeURIComponent(project));
    events.addEventListener("change", function () {
      refresh();
    });
  }
})();
