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

  function cards() {
    return Array.prototype.slice.call(container.querySelectorAll("article.interrupt"));
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
  function move(step) {
    const list = cards();
    if (!list.length) return;
    const index = list.indexOf(selected);
    select(list[Math.max(0, Math.min(list.length - 1, index < 0 ? 0 : index + step))]);
  }
  function target() {
    if (selected && selected.isConnected) return selected;
    const list = cards();
    return list.length ? list[0] : null;
  }

  // --- forms inside cards ------------------------------------------------------------
  function wire(card) {
    HITL.fillCsrf(card);
    const form = card.querySelector("form.decision");
    if (!form || form.dataset.wired) return;
    form.dataset.wired = "1";
    const accept = form.querySelector(".btn-accept");
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
  function act(card, action) {
    if (!card) return;
    const allowed = (card.dataset.allowed || "").split(" ");
    if (allowed.indexOf(action) < 0) {
      HITL.toast(card.dataset.allowed ? "This request does not allow " + action + "." : "You cannot answer this request.", { kind: "warn" });
      return;
    }
    select(card);
    if (action === "accept" || action === "ignore") {
      card.querySelector('button[data-action="' + action + '"]').click();
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
      existing.replaceWith(card);
    } else {
      container.appendChild(card);
      card.classList.add("fresh");
      if (!selected) select(card, false);
    }
    wire(card);
    syncTitle();
  }
  function retireCard(id, respondedBy) {
    const card = document.getElementById("interrupt-" + id);
    if (!card) return;
    const byOther = respondedBy && respondedBy !== me;
    if (byOther) {
      const form = card.querySelector("form.decision");
      const note = document.createElement("p");
      note.className = "form-error";
      note.setAttribute("role", "alert");
      note.textContent = "Already answered by " + respondedBy + ".";
      if (form) form.replaceWith(note); else card.appendChild(note);
      card.dataset.allowed = "";
      setTimeout(function () { card.remove(); syncTitle(); }, 6000);
    } else {
      card.remove();
    }
    if (selected === card) selected = null;
    syncTitle();
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

  function onMessage(message) {
    if (message.type === "thread.event") onEvent(message.event || {});
    else if (message.type === "interrupt.changed") {
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
    try {
      const response = await fetch(root.dataset.liveUrl, { credentials: "same-origin" });
      if (!response.ok) return;
      const data = await response.json();
      root.dataset.status = data.status;
      Object.keys(data.sections).forEach(function (name) {
        // Untouched sections keep their DOM (no image reloads, no lost <details> state).
        const el = document.getElementById("section-" + name);
        if (el && el.dataset.html === data.sections[name]) delete data.sections[name];
      });
      setSections(data.sections);
      const live = {};
      data.interrupts.forEach(function (item) { live[item.id] = true; addCard(item.id, item.html, true); });
      cards().forEach(function (card) {
        if (!live[card.dataset.interrupt]) retireCard(card.dataset.interrupt);
      });
    } catch (e) { /* the next reconnect tries again */ }
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
      case "a": act(card, "accept"); break;
      case "i": act(card, "ignore"); break;
      case "e": act(card, "edit"); break;
      case "r": act(card, "response"); break;
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
  select(fromHash || container.querySelector("article.has-error") || cards()[0], !!fromHash);
  try {
    const intent = JSON.parse(sessionStorage.getItem("hitl:intent") || "null");
    sessionStorage.removeItem("hitl:intent");
    if (intent) act(document.getElementById("interrupt-" + intent.id), intent.action);
  } catch (e) { /* ignore a malformed intent */ }
  const invalid = container.querySelector(".invalid input, .invalid textarea, .invalid select");
  if (invalid) invalid.focus();
})();
