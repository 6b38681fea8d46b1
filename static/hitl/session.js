// Every signed-in page: an expired session or a stale page said in words, and decisions
// typed before it expired kept in sessionStorage until they are sent.
(function () {
  "use strict";
  const HITL = (window.HITL = window.HITL || {});
  const PREFIX = "hitl:draft:";
  const MAX_AGE_MS = 24 * 3600 * 1000;

  // A refused fetch (401 session gone, 403 stale token, anything else) as a toast.
  HITL.failureToast = function (response, data) {
    data = data || {};
    if (response && (response.status === 401 || data.reason === "session")) {
      HITL.toast(data.error || "Your session has expired: log in again. Nothing was sent.", {
        kind: "warn", href: data.login || "/login/?next=" + encodeURIComponent(location.pathname + location.search),
        linkText: " Log in", ms: 15000,
      });
    } else if (response && response.status === 403 && data.reason === "csrf") {
      HITL.toast(data.error, { kind: "warn", href: location.href, linkText: " Reload", ms: 15000 });
    } else {
      HITL.toast(data.error || "That did not work.", { kind: "warn" });
    }
  };

  // --- drafts: what a decision form held when it was sent ------------------------------
  function save(form, submitter) {
    const card = form.closest("article.interrupt");
    if (!card) return;
    const values = {};
    Array.prototype.forEach.call(form.elements, function (el) {
      if (!el.name || el.name === "csrfmiddlewaretoken" || el.type === "submit") return;
      values[el.name] = el.type === "checkbox" ? el.checked : el.value;
    });
    const thread = document.getElementById("thread");
    const draft = {
      at: Date.now(),
      thread: thread ? thread.dataset.thread : "",
      type: submitter && submitter.name === "type" ? submitter.value : "",
      values: values,
    };
    try { sessionStorage.setItem(PREFIX + card.dataset.interrupt, JSON.stringify(draft)); } catch (e) { /* full or off */ }
  }
  document.addEventListener("submit", function (event) {
    const form = event.target;
    if (form.matches && form.matches("article.interrupt form.decision")) save(form, event.submitter);
  }, true);

  function restore(card, draft) {
    const form = card.querySelector("form.decision");
    let changed = false;
    Object.keys(draft.values).forEach(function (name) {
      const el = form.elements.namedItem(name);
      if (!el || el instanceof RadioNodeList) return;
      const value = draft.values[name];
      if (el.type === "checkbox") {
        if (el.checked !== value) { el.checked = value; changed = true; }
      } else if (el.value !== value) {
        el.value = value;
        changed = true;
      }
      el.dispatchEvent(new Event("input", { bubbles: true }));
    });
    if (!changed && !draft.type) return;
    const note = document.createElement("p");
    note.className = "note-hint restored-draft";
    note.setAttribute("role", "status");
    note.textContent = "Restored what you had typed before you were logged out" +
      (draft.type ? " (you chose " + (draft.type === "response" ? "respond" : draft.type) + ")" : "") +
      ": check it and send it again.";
    form.prepend(note);
  }

  // On a thread page: put back each draft whose item still waits; forget the others (they
  // were sent, or someone else answered). A card the server re-rendered with an error
  // already holds what was sent.
  function restoreAll() {
    const thread = document.getElementById("thread");
    if (!thread) return;
    Object.keys(sessionStorage).forEach(function (key) {
      if (key.indexOf(PREFIX) !== 0) return;
      let draft = null;
      try { draft = JSON.parse(sessionStorage.getItem(key)); } catch (e) { /* drop it */ }
      const card = document.getElementById("interrupt-" + key.slice(PREFIX.length));
      const live = card && card.querySelector("form.decision");
      if (!draft || Date.now() - draft.at > MAX_AGE_MS || (card && !live)) {
        sessionStorage.removeItem(key);
        return;
      }
      if (!card) {
        // Another thread's item stays until its page is visited; this thread's is done.
        if (draft.thread === thread.dataset.thread) sessionStorage.removeItem(key);
        return;
      }
      sessionStorage.removeItem(key);
      if (!card.classList.contains("has-error")) restore(card, draft);
    });
  }
  // After the page's own script has wired its cards (deferred scripts run before this).
  document.addEventListener("DOMContentLoaded", restoreAll);
})();
