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
  // A draft is taken as a decision form is sent ("sent"), and judged on the next page
  // this tab loads: the login page or the stale-form page mean the send failed (the draft
  // is kept to restore); any other page means the server answered (the draft is dropped).
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
      state: "sent",
      thread: thread ? thread.dataset.thread : "",
      args: card.dataset.argsDigest || "",
      type: submitter && submitter.name === "type" ? submitter.value : "",
      values: values,
    };
    try { sessionStorage.setItem(PREFIX + card.dataset.interrupt, JSON.stringify(draft)); } catch (e) { /* full or off */ }
  }
  // Bubbling to the window: after every other submit handler, so a prompt the reviewer
  // cancelled ("… is on it. Decide anyway?") sends nothing and keeps no draft.
  window.addEventListener("submit", function (event) {
    const form = event.target;
    if (event.defaultPrevented || !form.matches || !form.matches("article.interrupt form.decision")) return;
    save(form, event.submitter);
  });

  function drafts() {
    const found = [];
    Object.keys(sessionStorage).forEach(function (key) {
      if (key.indexOf(PREFIX) !== 0) return;
      let draft = null;
      try { draft = JSON.parse(sessionStorage.getItem(key)); } catch (e) { /* dropped below */ }
      if (!draft || !draft.values || Date.now() - draft.at > MAX_AGE_MS) sessionStorage.removeItem(key);
      else found.push({ key: key, id: key.slice(PREFIX.length), draft: draft });
    });
    return found;
  }
  function judge() {
    const failedHere = !!document.querySelector("[data-send-failed]");
    drafts().forEach(function (item) {
      if (item.draft.state !== "sent") return;
      if (failedHere) {
        item.draft.state = "failed";
        sessionStorage.setItem(item.key, JSON.stringify(item.draft));
      } else {
        sessionStorage.removeItem(item.key);  // answered: applied, refused or lost a race
      }
    });
  }

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

  // On a thread page: put back each failed send whose item still waits with the args
  // the draft was typed over; forget the others.
  function restoreAll() {
    judge();
    const thread = document.getElementById("thread");
    if (!thread) return;
    drafts().forEach(function (item) {
      const draft = item.draft;
      const card = document.getElementById("interrupt-" + item.id);
      const live = card && card.querySelector("form.decision");
      if (!card) {
        // Another thread's item stays until its page is visited; this thread's is done.
        if (draft.thread === thread.dataset.thread) sessionStorage.removeItem(item.key);
        return;
      }
      sessionStorage.removeItem(item.key);
      if (!live || card.classList.contains("has-error")) return;
      if ((card.dataset.argsDigest || "") !== (draft.args || "")) {
        // Someone changed the args since: typing them back would revert their edit.
        const note = document.createElement("p");
        note.className = "note-hint restored-draft";
        note.setAttribute("role", "status");
        note.textContent = "What you typed before you were logged out was not restored: the args changed since. Review them as they are now.";
        live.prepend(note);
        return;
      }
      restore(card, draft);
    });
  }
  // After the page's own script has wired its cards (deferred scripts run before this).
  document.addEventListener("DOMContentLoaded", restoreAll);
})();
