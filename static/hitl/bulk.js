// Inbox bulk decisions: pick rows (click or x), or every item matching the filter, then
// accept / ignore / respond to all of them; the server decides each one and lists results.
(function () {
  "use strict";
  const HITL = window.HITL;
  const inbox = document.getElementById("inbox");
  const bar = document.getElementById("bulk-bar");
  if (!HITL || !inbox || !bar) return;
  const count = document.getElementById("bulk-count");
  const allButton = document.getElementById("bulk-all");
  const text = document.getElementById("bulk-text");
  const results = document.getElementById("bulk-results");
  const picked = new Set();
  let matching = null;  // {count} once "select all matching this filter" was chosen
  let busy = false;

  function boxes() {
    return Array.prototype.slice.call(inbox.querySelectorAll("tbody input.pick-box"));
  }
  function filterParams() {
    const d = inbox.dataset;
    const params = new URLSearchParams();
    if (d.group) params.set("group", d.group);
    if (d.graph) params.set("graph", d.graph);
    if (d.clarification) params.set("clarification", d.clarification);
    if (d.mine) params.set("mine", "1");
    if (d.claimed) params.set("claimed", d.claimed);
    if (d.snoozed) params.set("snoozed", "1");
    return params;
  }
  function render() {
    boxes().forEach(function (box) {
      box.checked = matching !== null || picked.has(box.value);
      box.closest("tr").classList.toggle("picked", box.checked);
    });
    const pageBox = document.getElementById("pick-page");
    const visible = boxes();
    if (pageBox) pageBox.checked = visible.length > 0 && visible.every(function (b) { return b.checked; });
    const n = matching !== null ? matching.count : picked.size;
    bar.hidden = n === 0 && !busy;
    count.textContent = matching !== null
      ? "All " + n + " item" + (n === 1 ? "" : "s") + " matching this filter selected"
      : n + " selected";
    allButton.hidden = matching !== null;
    bar.querySelectorAll("[data-bulk]").forEach(function (button) { button.disabled = busy || n === 0; });
  }
  const me = document.body.dataset.user || "";
  // Up to this many items are decided at once; more ask first, naming some of them.
  const CONFIRM_ABOVE = 3;
  const VERBS = { accept: "Accept", ignore: "Ignore", response: "Send the answer to" };
  function confirmText(type, n, chosen) {
    const names = chosen.filter(Boolean).slice(0, 5).map(function (row) {
      const link = row.querySelector("a.title");
      return "• " + (link ? link.textContent.replace(/\s+/g, " ").trim() : "item") + " on “" + row.dataset.title + "”";
    });
    const more = n - names.length;
    return VERBS[type] + " " + n + " items?\n" + names.join("\n") + (more > 0 ? "\n… and " + more + " more" : "");
  }
  // The results' "Undo all" lasts as long as a single decision's Undo.
  function armBulkUndo() {
    const box = results.querySelector(".bulk-undo");
    if (!box) return;
    const button = box.querySelector("button");
    const countdown = box.querySelector(".countdown");
    const end = Date.now() + (parseFloat(box.dataset.seconds) || 0) * 1000;
    const timer = setInterval(tick, 250);
    function tick() {
      const left = Math.ceil((end - Date.now()) / 1000);
      if (left > 0) { countdown.textContent = "(" + left + " s)"; return; }
      clearInterval(timer);
      box.textContent = "Sent to the agent.";
      box.className = "muted small";
    }
    tick();
    button.addEventListener("click", async function () {
      button.disabled = true;
      const body = new URLSearchParams();
      box.dataset.ids.split(" ").forEach(function (id) { body.append("ids", id); });
      body.set("csrfmiddlewaretoken", HITL.csrfToken());
      try {
        const response = await fetch(box.dataset.url, {
          method: "POST", body: body, credentials: "same-origin", headers: { Accept: "application/json" },
        });
        const data = await response.json();
        clearInterval(timer);
        box.textContent = data.message || data.error || "That did not work.";
        box.className = response.ok ? "small" : "small form-error";
        HITL.toast(box.textContent, response.ok ? {} : { kind: "warn" });
      } catch (e) {
        button.disabled = false;
        HITL.toast("Network error; try again.", { kind: "warn" });
      }
    });
  }
  function claimedByOthers(rowsToCheck) {
    return rowsToCheck.filter(function (row) {
      const chip = row && row.querySelector(".chip.claim[data-claimed-by]");
      return chip && chip.dataset.claimedBy !== me;
    });
  }
  // Quick keys on a row someone else claimed ask first (capture: before inbox.js acts).
  window.addEventListener("keydown", function (event) {
    if ((event.key !== "a" && event.key !== "i") || HITL.isTyping(event) || event.ctrlKey || event.metaKey || event.altKey) return;
    const row = inbox.querySelector("tbody tr.row.selected");
    const taken = claimedByOthers([row]);
    if (taken.length && !window.confirm(taken[0].querySelector(".chip.claim").dataset.claimedBy + " is on it. Decide anyway?")) {
      event.preventDefault();
      event.stopImmediatePropagation();
    }
  }, true);

  function toggle(id, on) {
    matching = null;
    if (on) picked.add(id); else picked.delete(id);
    render();
  }
  function clear() {
    picked.clear();
    matching = null;
    render();
  }

  inbox.addEventListener("change", function (event) {
    const box = event.target;
    if (box.classList && box.classList.contains("pick-box")) toggle(box.value, box.checked);
    if (box.id === "pick-page") {
      matching = null;
      boxes().forEach(function (b) { if (box.checked) picked.add(b.value); else picked.delete(b.value); });
      render();
    }
  });
  document.addEventListener("keydown", function (event) {
    if (event.key !== "x" || HITL.isTyping(event) || event.ctrlKey || event.metaKey || event.altKey) return;
    const row = inbox.querySelector("tbody tr.row.selected");
    const box = row && row.querySelector("input.pick-box");
    if (!box) return;
    event.preventDefault();
    toggle(box.value, !(matching !== null || picked.has(box.value)));
  });
  allButton.addEventListener("click", async function () {
    const response = await fetch(bar.dataset.url + "?" + filterParams().toString(), {
      credentials: "same-origin", headers: { Accept: "application/json" },
    });
    const data = await response.json();
    if (!response.ok) { HITL.toast(data.error || "That did not work.", { kind: "warn" }); return; }
    matching = { count: data.count };
    render();
  });
  document.getElementById("bulk-clear").addEventListener("click", clear);
  results.addEventListener("click", function (event) {
    if (event.target.id === "bulk-results-close") results.innerHTML = "";
  });

  bar.addEventListener("click", async function (event) {
    const button = event.target.closest("[data-bulk]");
    if (!button || busy) return;
    const type = button.dataset.bulk;
    const answer = text.value.trim();
    if (type === "response" && !answer) { HITL.toast("Write the answer to send first.", { kind: "warn" }); text.focus(); return; }
    if (type !== "response" && answer) { HITL.toast("Only Respond sends text; clear it first.", { kind: "warn" }); return; }
    const chosen = matching !== null ? boxes().map(function (b) { return b.closest("tr"); })
      : Array.from(picked).map(function (id) { return document.getElementById("row-" + id); });
    const taken = claimedByOthers(chosen);
    if (taken.length && !window.confirm(taken.length + " of the selected items " + (taken.length === 1 ? "is" : "are") + " claimed by someone else. Decide anyway?")) return;
    const n = matching !== null ? matching.count : picked.size;
    if (n > CONFIRM_ABOVE && !window.confirm(confirmText(type, n, chosen))) return;
    const body = matching !== null ? filterParams() : new URLSearchParams();
    if (matching !== null) body.set("scope", "filter");
    else picked.forEach(function (id) { body.append("ids", id); });
    body.set("type", type);
    if (type === "response") body.set("text", answer);
    body.set("csrfmiddlewaretoken", HITL.csrfToken());
    busy = true;
    render();
    count.textContent = "Deciding…";
    try {
      const response = await fetch(bar.dataset.url, {
        method: "POST", body: body, credentials: "same-origin", headers: { Accept: "application/json" },
      });
      const data = await response.json();
      if (!response.ok) { HITL.toast(data.error || "That did not work.", { kind: "warn" }); return; }
      results.innerHTML = data.html;
      armBulkUndo();
      data.results.forEach(function (item) {
        // Decided or answered elsewhere: gone from the pending list (the live event agrees).
        if (item.outcome === "decided" || item.outcome === "answered") {
          const row = document.getElementById("row-" + item.id);
          if (row) row.remove();
        }
      });
      text.value = "";
      picked.clear();
      matching = null;
      const empty = document.getElementById("inbox-empty");
      if (empty) empty.hidden = boxes().length > 0;
    } catch (e) {
      HITL.toast("Network error; nothing more was sent. Check the results and try again.", { kind: "warn" });
    } finally {
      busy = false;
      render();
    }
  });

  // Live: an item answered elsewhere leaves the selection; re-rendered lists keep it.
  document.addEventListener("hitl:inbox", function (event) {
    const message = event.detail;
    if (message.type === "interrupt.changed" && message.status !== "pending") {
      picked.delete(message.interrupt_id);
      render();
    }
  });
  new MutationObserver(render).observe(inbox, { childList: true, subtree: true });
  render();
})();
