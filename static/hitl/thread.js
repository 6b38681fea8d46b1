// Thread page: live cards and sections, streamed output, keyboard decisions.
(function () {
  "use strict";
  const HITL = window.HITL;
  const root = document.getElementById("thread");
  if (!HITL || !root) return;
  const container = document.getElementById("interrupts");
  const output = document.getElementById("live-output");
  const me = document.body.dataset.user;
  let selected = null;
  // A run seen working from this page (started here, or resumed by a decision here).
  let followed = root.dataset.follow === "1" || root.dataset.status === "busy";

  // The cards still waiting for a decision (a card someone else answered is not one).
  function cards() {
    return Array.prototype.slice.call(container.querySelectorAll("article.interrupt:not(.lost):not(.co-approved)"));
  }
  function syncTitle() {
    document.getElementById("interrupts-title").hidden = cards().length === 0;
  }
  function select(card, scroll) {
    cards().forEach(function (c) { c.classList.remove("selected"); });
    selected = card || null;
    if (!selected) return;
    selected.classList.add("selected");
    if (scroll !== false) selected.scrollIntoView({ block: "nearest", behavior: "smooth" });
  }
  // Bring a card into view whole when it fits, its decision buttons included; a taller
  // one from its top. The page opened on it (#interrupt-…), or the run it followed paused.
  function reveal(card) {
    if (!card || !card.isConnected) return;
    const rect = card.getBoundingClientRect();
    const below = rect.bottom + 12 - window.innerHeight;
    if (below > 0) window.scrollBy(0, Math.min(below, rect.top - 8));
    else if (rect.top < 0) window.scrollBy(0, rect.top - 8);
  }
  function move(step) {
    const list = cards();
    if (!list.length) return;
    const index = list.indexOf(selected);
    select(list[Math.max(0, Math.min(list.length - 1, index < 0 ? 0 : index + step))]);
  }
  function target() {
    return selected && selected.isConnected ? selected : null;
  }

  // --- forms inside cards ------------------------------------------------------------
  function wire(card) {
    HITL.fillCsrf(card);
    if (card.dataset.interrupt) HITL.markSeen(card.dataset.interrupt);
    const form = card.querySelector("form.decision");
    if (!form || form.dataset.wired) return;
    form.dataset.wired = "1";
    if (HITL.syncApprove) HITL.syncApprove(card);
    const accept = form.querySelector(".btn-accept");
    // A typed edit Undo gave back: the card starts edited.
    if (card.classList.contains("dirty") && accept) accept.firstChild.textContent = "Accept as proposed ";
    form.addEventListener("input", function (event) {
      const editor = event.target.closest(".args.editable");
      if (editor) {
        card.classList.add("dirty");
        if (accept) accept.firstChild.textContent = "Accept as proposed ";
      }
      if (event.target.classList.contains("json-editor")) {
        const status = event.target.parentElement.querySelector(".json-status");
        try {
          JSON.parse(event.target.value);
          status.textContent = "valid JSON";
          status.classList.remove("bad");
        } catch (e) {
          status.textContent = "not valid JSON yet: " + e.message;
          status.classList.add("bad");
        }
      }
    });
    const note = form.querySelector(".respond textarea");
    if (note) {
      note.addEventListener("input", function () { syncNote(card); });
      syncNote(card);
    }
    form.addEventListener("submit", function () {
      // Disable after the browser has collected the pressed button's value.
      setTimeout(function () {
        form.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
      }, 0);
    });
    form.addEventListener("keydown", function (event) {
      if (event.key !== "Enter" || !(event.ctrlKey || event.metaKey)) return;
      const inRespond = event.target.closest(".respond");
      const button = form.querySelector(inRespond ? ".btn-respond" : ".btn-edit") ||
        form.querySelector(".btn-respond, .btn-edit");
      if (button) { event.preventDefault(); button.click(); }
    });
  }
  // A note goes to the agent only with Respond: while there is one, the decisions that
  // cannot carry it are disabled (and say why) instead of dropping the text.
  function syncNote(card) {
    const note = card.querySelector(".respond textarea");
    const buttons = card.querySelectorAll(".btn-accept, .btn-edit, .btn-ignore, button.option");
    const hasNote = !!note && note.value.trim() !== "";
    buttons.forEach(function (b) { b.disabled = hasNote || !!b.dataset.refused; });
    let hint = card.querySelector(".note-hint");
    if (hasNote && !hint && buttons.length) {
      hint = document.createElement("p");
      hint.className = "note-hint small";
      hint.setAttribute("role", "status");
      const respond = card.querySelector(".btn-respond");
      const label = respond ? respond.firstChild.textContent.trim() : "Respond";
      hint.textContent = "Your note is sent only with " + label + ". Clear it to choose another decision.";
      card.querySelector(".buttons").after(hint);
    } else if (!hasNote && hint) {
      hint.remove();
    }
  }
  // What the reviewer typed into a card: changed argument fields and the note.
  function typedIn(card) {
    const lines = [];
    card.querySelectorAll(".args.editable [data-key]").forEach(function (field) {
      let changed;
      if (field.type === "checkbox") changed = field.checked !== field.defaultChecked;
      else if (field.tagName === "SELECT") changed = Array.prototype.some.call(field.options, function (o) { return o.selected !== o.defaultSelected; });
      else changed = field.value !== field.defaultValue;
      if (changed) lines.push(field.dataset.key + ": " + (field.type === "checkbox" ? field.checked : field.value));
    });
    const note = card.querySelector(".respond textarea");
    if (note && note.value.trim()) lines.push(lines.length ? "note: " + note.value : note.value);
    return lines.join("\n");
  }
  function act(card, action, fromKey) {
    if (fromKey && !HITL.isVisiblySelected(card)) {
      HITL.toast("Select an item first: j / k, or click it.", { kind: "warn" });
      return;
    }
    if (!card) return;
    const allowed = (card.dataset.allowed || "").split(" ");
    if (allowed.indexOf(action) < 0) {
      HITL.toast(card.dataset.allowed ? "This request does not allow " + action + "." : "You cannot answer this request.", { kind: "warn" });
      return;
    }
    select(card);
    if (action === "accept" || action === "ignore") {
      const button = card.querySelector('button[data-action="' + action + '"]');
      if (button.disabled) {
        HITL.toast("Your note is sent only with Respond: send it, or clear it first.", { kind: "warn" });
        return;
      }
      button.click();
    } else if (action === "edit") {
      const field = card.querySelector(".args.editable input:not([type=hidden]), .args.editable textarea, .args.editable select");
      if (field) field.focus();
    } else {
      const field = card.querySelector(".respond textarea");
      if (field) field.focus();
    }
  }

  // --- live updates --------------------------------------------------------------------
  function addCard(id, html, keepExisting) {
    const existing = document.getElementById("interrupt-" + id);
    if (existing && keepExisting) return;
    const card = HITL.fragment(html);
    if (existing) {
      // Keep what the reviewer is typing; replace only untouched cards.
      if (existing.contains(document.activeElement) || existing.classList.contains("dirty")) return;
      carrySnooze(existing, card);
      existing.replaceWith(card);
    } else {
      container.appendChild(card);
      card.classList.add("fresh");
      if (!selected) {
        select(card, false);
        // The run this page followed paused on it: show it, Accept included.
        if (followed && cards().length === 1) requestAnimationFrame(function () { reveal(card); });
      }
    }
    wire(card);
    syncTitle();
  }
  // A card pushed to everyone does not know who set it aside: keep this reviewer's note.
  function carrySnooze(from, to) {
    const note = from.querySelector("[data-snooze]:not([hidden])");
    const slot = to.querySelector("[data-snooze]");
    if (!note || !slot || !slot.hidden) return;
    slot.replaceWith(note);
    const form = to.querySelector(".snooze-form");
    if (form) form.hidden = true;
  }
  function retireCard(id, respondedBy) {
    const card = document.getElementById("interrupt-" + id);
    if (!card) return;
    const byOther = respondedBy && respondedBy !== me;
    if (byOther) {
      const form = card.querySelector("form.decision");
      const typed = typedIn(card);
      // Four-eyes: this reviewer's own approval counted, another gave the last one. It
      // was not answered over their head: no alarm, and say so in those words.
      const approvals = card.querySelector(".approvals");
      const approvers = approvals ? (approvals.dataset.names || "").split(" ") : [];
      const coApproved = me !== "" && approvers.indexOf(me) >= 0 && !typed;
      const note = document.createElement("p");
      note.className = coApproved ? "flash success" : "form-error";
      note.setAttribute("role", coApproved ? "status" : "alert");
      // Nothing was sent from this page: say what is so, not that a decision failed.
      note.textContent = coApproved
        ? "Your approval counted; " + respondedBy + " gave the last one."
        : "Already answered by " + respondedBy + "." + (typed ? " What you typed here was not sent." : "");
      if (form) form.replaceWith(note); else card.appendChild(note);
      // Nothing is left to decide or claim here: it no longer "needs a decision".
      card.querySelectorAll(".note-hint, .claim-bar, .approve-refusal").forEach(function (el) { el.remove(); });
      const eyebrow = card.querySelector(".eyebrow");
      if (eyebrow) eyebrow.textContent = coApproved ? "Approved, with your approval" : "Answered by someone else";
      card.dataset.allowed = "";
      card.classList.add(coApproved ? "co-approved" : "lost");
      card.classList.remove("selected", "dirty");
      container.insertBefore(card, document.getElementById("interrupts-title"));
      showOutcome(card, id, note);
      if (typed) {
        // Keep the card: what the reviewer typed stays here to copy until dismissed.
        const label = document.createElement("label");
        label.className = "small";
        label.textContent = "What you typed (not sent; copy it if you need it)";
        const box = document.createElement("textarea");
        box.className = "lost-typed";
        box.readOnly = true;
        box.rows = 4;
        box.value = typed;
        box.id = "lost-typed-" + id;
        label.htmlFor = box.id;
        const dismiss = document.createElement("button");
        dismiss.type = "button";
        dismiss.className = "secondary";
        dismiss.textContent = "Dismiss";
        dismiss.addEventListener("click", function () { card.remove(); syncTitle(); });
        card.append(label, box, dismiss);
      } else {
        setTimeout(function () { card.remove(); syncTitle(); }, 8000);
      }
    } else {
      card.remove();
    }
    if (selected === card) selected = null;
    syncTitle();
  }
  // A background fetch refused because the session ended: say so once, with a way back.
  let signedOutSaid = false;
  async function sayIfSignedOut(response) {
    if (response.status !== 401 || signedOutSaid || !HITL.failureToast) return;
    signedOutSaid = true;
    let data = {};
    try { data = await response.json(); } catch (e) { /* a 401 without a body */ }
    HITL.failureToast(response, data);
  }
  const ASK = { credentials: "same-origin", headers: { Accept: "text/html, application/json" } };

  async function showOutcome(card, id, after) {
    try {
      const response = await fetch("/interrupts/" + id + "/outcome/", ASK);
      if (!response.ok) { await sayIfSignedOut(response); return; }
      const outcome = HITL.fragment(await response.text());
      if (outcome && card.isConnected) after.after(outcome);
    } catch (e) { /* the note above already says who answered */ }
  }
  function setSections(sections) {
    Object.keys(sections).forEach(function (name) {
      const el = document.getElementById("section-" + name);
      if (el) {
        el.dataset.html = sections[name];
        el.innerHTML = sections[name];
        HITL.fillCsrf(el);
      }
    });
  }

  const streams = {};
  function note(text) {
    let el = output.querySelector(".stream-note");
    if (!el) {
      el = document.createElement("div");
      el.className = "stream-note";
      output.appendChild(el);
    }
    el.textContent = text;
  }
  function onEvent(event) {
    if (event.type === "RUN_STARTED") followed = true;
    document.dispatchEvent(new CustomEvent("hitl:thread-event", { detail: event }));
    switch (event.type) {
      case "RUN_STARTED": note("Run started…"); break;
      case "STEP_STARTED": note("Working: " + event.stepName + "…"); break;
      case "STEP_FINISHED": note("Finished step " + event.stepName + "."); break;
      case "TEXT_MESSAGE_START": {
        const el = document.createElement("div");
        el.className = "stream-msg";
        streams[event.messageId] = el;
        output.insertBefore(el, output.querySelector(".stream-note"));
        break;
      }
      case "TEXT_MESSAGE_CONTENT":
      case "TEXT_MESSAGE_CHUNK": {
        let el = streams[event.messageId];
        if (!el) { onEvent({ type: "TEXT_MESSAGE_START", messageId: event.messageId }); el = streams[event.messageId]; }
        el.textContent += event.delta || "";
        break;
      }
      case "TOOL_CALL_START": note("Calling " + (event.toolCallName || "a tool") + "…"); break;
      case "TOOL_CALL_RESULT": note("Tool finished."); break;
      case "RUN_ERROR": note("The run failed: " + (event.message || "error")); break;
      default: break;
    }
  }

  // A decision or an undo changes the audit trail and the decisions list, not the
  // thread's status: fetch the sections again (once for a burst of events).
  let refreshTimer = null;
  function refreshSections() {
    clearTimeout(refreshTimer);
    refreshTimer = setTimeout(async function () {
      const read = startRead();
      try {
        const response = await fetch(root.dataset.liveUrl, { credentials: "same-origin", headers: { Accept: "application/json" } });
        if (!response.ok) { await sayIfSignedOut(response); return; }
        applyRead(read, await response.json());
      } catch (e) { /* the next event or reconnect tries again */ }
    }, 250);
  }

  // Reads of the sections may answer out of order, and a thread.changed message brings
  // sections newer than a read started before it: only the latest read started, with no
  // such message heard since, is applied (else a page showed a failed run's banner
  // beside the status "running" it had read a moment before).
  let reads = 0;
  function startRead() { reads += 1; return { number: reads, heard: heard }; }
  function applyRead(read, data) {
    if (read.number !== reads || statusHeardAt > read.heard) return;
    root.dataset.status = data.status;
    const sections = data.sections;
    Object.keys(sections).forEach(function (name) {
      // Untouched sections keep their DOM (no image reloads, no lost <details> state).
      const el = document.getElementById("section-" + name);
      if (el && el.dataset.html === sections[name]) delete sections[name];
    });
    setSections(sections);
  }

  // Four-eyes: another approver edited the args. The card is replaced at once, with the
  // changed fields highlighted; what this reviewer had typed over the old args is kept
  // aside to copy, never left in a form that would send it (and revert the edit).
  async function refreshEdited(message) {
    const card = document.getElementById("interrupt-" + message.interrupt_id);
    if (!card || !message.edited) return;
    let data;
    try {
      const response = await fetch(root.dataset.liveUrl, { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (!response.ok) { await sayIfSignedOut(response); return; }
      data = await response.json();
    } catch (e) { return; }
    const item = data.interrupts.filter(function (i) { return i.id === message.interrupt_id; })[0];
    const now = document.getElementById("interrupt-" + message.interrupt_id);
    if (!item || !now) return;
    const fresh = HITL.fragment(item.html);
    if (fresh.dataset.argsDigest === now.dataset.argsDigest) return;
    const changed = [];
    fresh.querySelectorAll("[data-key]").forEach(function (field) {
      const old = now.querySelector('[data-key="' + field.dataset.key + '"]');
      const before = old ? (old.type === "checkbox" ? String(old.defaultChecked) : old.defaultValue) : null;
      const after = field.type === "checkbox" ? String(field.defaultChecked) : field.defaultValue;
      if (before !== after) {
        changed.push(field.dataset.key);
        const box = field.closest(".field");
        if (box) box.classList.add("changed");
      }
    });
    const typed = typedIn(now);
    const editor = message.approvers && message.approvers.length ? message.approvers[0] : "another reviewer";
    const note = document.createElement("p");
    note.className = "args-changed";
    note.setAttribute("role", "alert");
    note.textContent = "The args were just edited by " + editor + (changed.length ? " (" + changed.join(", ") + ")" : "") +
      "; earlier approvals were reset. Review them as they are now before you approve.";
    const form = fresh.querySelector("form.decision");
    if (form) form.prepend(note); else fresh.appendChild(note);
    if (typed) {
      const label = document.createElement("label");
      label.className = "small";
      label.textContent = "What you had typed over the old args (not sent; copy it if you need it)";
      const box = document.createElement("textarea");
      box.className = "lost-typed";
      box.readOnly = true;
      box.rows = 3;
      box.value = typed;
      box.id = "lost-typed-" + message.interrupt_id;
      label.htmlFor = box.id;
      fresh.append(label, box);
    }
    const wasSelected = selected === now;
    now.replaceWith(fresh);
    wire(fresh);
    if (wasSelected) select(fresh, false);
  }

  // Live messages in arrival order, and the last one about each card and about the
  // thread's status: a resync answered with what was read before one of them arrived
  // must not undo it (take back a card it added, bring back one it retired).
  let heard = 0;
  const heardAt = {};
  let statusHeardAt = 0;

  function onMessage(message) {
    heard += 1;
    if (message.interrupt_id) heardAt[message.interrupt_id] = heard;
    if (message.type === "thread.changed") statusHeardAt = heard;
    if (message.type === "thread.event") onEvent(message.event || {});
    else if (message.type === "interrupt.progress") {
      HITL.approvalProgress(message);
      refreshEdited(message);
    }
    else if (message.type === "interrupt.changed") {
      refreshSections();
      if (message.status === "pending" && message.html) {
        addCard(message.interrupt_id, message.html);
        if (document.hidden) HITL.notify("New request on " + document.title, "", location.href);
      } else if (message.status !== "pending") {
        retireCard(message.interrupt_id, message.responded_by);
      }
    } else if (message.type === "thread.changed") {
      root.dataset.status = message.status;
      if (message.sections) setSections(message.sections);
      if (message.status !== "busy") {
        output.innerHTML = "";
        Object.keys(streams).forEach(function (k) { delete streams[k]; });
      }
    }
  }

  async function resync() {
    const read = startRead();
    const asked = read.heard;
    const newer = function (id) { return (heardAt[id] || 0) > asked; };
    try {
      const response = await fetch(root.dataset.liveUrl, { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (!response.ok) { await sayIfSignedOut(response); return; }
      const data = await response.json();
      applyRead(read, data);
      const live = {};
      data.interrupts.forEach(function (item) {
        live[item.id] = true;
        if (!newer(item.id)) addCard(item.id, item.html, true);
      });
      cards().forEach(function (card) {
        const id = card.dataset.interrupt;
        if (!live[id] && !newer(id)) retireCard(id);
      });
      // The sections just set may predate a message heard meanwhile: read them again.
      if (heard !== asked) refreshSections();
    } catch (e) { /* the next reconnect tries again */ }
    document.dispatchEvent(new CustomEvent("hitl:resynced"));
  }

  HITL.thread = HITL.connect("thread", root.dataset.socket, {
    // Resync on every (re)connect: whatever happened between rendering this page (or
    // losing the socket) and subscribing would otherwise be missed.
    open: function () { resync(); },
    message: onMessage,
  });

  // --- keyboard --------------------------------------------------------------------------
  document.addEventListener("keydown", function (event) {
    if (HITL.isTyping(event) || event.ctrlKey || event.metaKey || event.altKey) return;
    const card = target();
    switch (event.key) {
      case "j": move(1); break;
      case "k": move(-1); break;
      case "a": act(card, "accept", true); break;
      case "i": act(card, "ignore", true); break;
      case "e": act(card, "edit", true); break;
      case "r": act(card, "response", true); break;
      case "Enter": {
        if (!card) return;
        const first = card.querySelector("form input:not([type=hidden]), form textarea, form select, form button");
        if (first) first.focus();
        break;
      }
      default: return;
    }
    event.preventDefault();
  });
  container.addEventListener("click", function (event) {
    const card = event.target.closest("article.interrupt");
    if (card && card !== selected) select(card, false);
  });

  // --- first paint ----------------------------------------------------------------------
  cards().forEach(wire);
  const fromHash = location.hash.indexOf("#interrupt-") === 0 ? document.getElementById(location.hash.slice(1)) : null;
  select(fromHash || container.querySelector("article.has-error") || cards()[0], false);
  if (fromHash) {
    // Once files and images have their size; the browser's own jump to the anchor is done.
    if (document.readyState === "complete") reveal(fromHash);
    else window.addEventListener("load", function () { reveal(fromHash); });
  }
  let intent = null;
  try {
    intent = JSON.parse(sessionStorage.getItem("hitl:intent") || "null");
    sessionStorage.removeItem("hitl:intent");
  } catch (e) { /* ignore a malformed intent */ }
  if (intent) {
    // After load: the browser focuses the #interrupt-… target itself once it has scrolled.
    const run = function () {
      setTimeout(function () { act(document.getElementById("interrupt-" + intent.id), intent.action); }, 0);
    };
    if (document.readyState === "complete") run(); else window.addEventListener("load", run);
  }
  const invalid = container.querySelector(".invalid input, .invalid textarea, .invalid select");
  if (invalid) invalid.focus();
})();
