// Shared by every page: live sockets with reconnect, CSRF for injected forms, toasts,
// browser notifications (opt-in), and the keyboard help.
(function () {
  "use strict";
  const HITL = (window.HITL = window.HITL || {});
  document.documentElement.classList.add("js");

  HITL.csrfToken = function () {
    const meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.content : "";
  };

  // Fragments that arrive over a socket were rendered without a request: give their
  // forms this page's token.
  HITL.fillCsrf = function (root) {
    root.querySelectorAll('input[name="csrfmiddlewaretoken"]').forEach(function (input) {
      if (!input.value) input.value = HITL.csrfToken();
    });
  };

  // The inbox as this tab last filtered it (its address, less the page cursor): the
  // "Inbox" links and `g i` go back to it, so a filter survives opening an item.
  const INBOX_KEY = "hitl:inbox-query";
  HITL.rememberInbox = function (search) {
    const params = new URLSearchParams(search);
    ["after", "before", "last", "partial"].forEach(function (key) { params.delete(key); });
    const query = params.toString();
    try { sessionStorage.setItem(INBOX_KEY, query ? "?" + query : ""); } catch (e) { /* storage off */ }
  };
  HITL.inboxHref = function () {
    let query = "";
    try { query = sessionStorage.getItem(INBOX_KEY) || ""; } catch (e) { /* storage off */ }
    return "/" + query;
  };
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("a[data-inbox-link]").forEach(function (link) {
      link.href = HITL.inboxHref();
    });
  });

  // "They can still undo it" is true for so many seconds after the page got it: the
  // words go when the grace period ends, so a page read later does not promise it.
  HITL.expireUndoNotes = function (root) {
    root.querySelectorAll("[data-undo-seconds]").forEach(function (note) {
      const seconds = parseFloat(note.dataset.undoSeconds) || 0;
      note.removeAttribute("data-undo-seconds");
      setTimeout(function () { note.remove(); }, seconds * 1000);
    });
  };
  document.addEventListener("DOMContentLoaded", function () { HITL.expireUndoNotes(document); });

  HITL.fragment = function (html) {
    const template = document.createElement("template");
    template.innerHTML = html.trim();
    HITL.fillCsrf(template.content);
    HITL.expireUndoNotes(template.content);
    return template.content.firstElementChild;
  };

  HITL.isTyping = function (event) {
    const el = event.target;
    return !!el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
  };

  HITL.toast = function (text, options) {
    options = options || {};
    const box = document.getElementById("toasts");
    if (!box) return;
    const el = document.createElement("div");
    el.className = "toast" + (options.kind ? " " + options.kind : "");
    el.setAttribute("role", "status");
    el.textContent = text;
    if (options.href) {
      const link = document.createElement("a");
      link.href = options.href;
      link.textContent = options.linkText || " Open";
      el.appendChild(link);
    }
    box.appendChild(el);
    setTimeout(function () { el.remove(); }, options.ms || 5000);
  };

  // --- undo: a decision made here can be taken back while its grace period lasts -----
  function armUndo(el, seconds, onUndo) {
    const end = Date.now() + seconds * 1000;
    const countdown = el.querySelector(".countdown");
    const button = el.querySelector(".undo-button");
    function tick() {
      const left = Math.ceil((end - Date.now()) / 1000);
      if (left > 0) {
        if (countdown) countdown.textContent = "(" + left + " s)";
        return;
      }
      clearInterval(timer);
      // The server decides; past this point it would refuse anyway.
      const form = button.closest("form") || button;
      const done = document.createElement("span");
      done.className = "muted-light";
      done.textContent = " Sent to the agent.";
      form.replaceWith(done);
      setTimeout(function () { el.remove(); }, 2500);
    }
    const timer = setInterval(tick, 250);
    tick();
    if (onUndo) button.addEventListener("click", function (event) { event.preventDefault(); onUndo(); });
    return { stop: function () { clearInterval(timer); } };
  }

  // For decisions made with fetch (the inbox's quick keys): a toast with an Undo button.
  HITL.undoToast = function (text, undo, onUndone) {
    const box = document.getElementById("toasts");
    if (!box || !undo) { HITL.toast(text); return; }
    const el = document.createElement("div");
    el.className = "toast undo-toast";
    el.setAttribute("role", "status");
    const label = document.createElement("span");
    label.className = "text";
    label.textContent = text;
    const button = document.createElement("button");
    button.type = "button";
    button.className = "undo-button";
    button.innerHTML = 'Undo <span class="countdown"></span>';
    el.append(label, button);
    box.appendChild(el);
    const armed = armUndo(el, undo.seconds, async function () {
      button.disabled = true;
      const body = new FormData();
      body.append("csrfmiddlewaretoken", HITL.csrfToken());
      try {
        const response = await fetch(undo.url, {
          method: "POST", body: body, headers: { Accept: "application/json" }, credentials: "same-origin",
        });
        const data = await response.json();
        armed.stop();
        el.remove();
        HITL.toast(data.message || data.error || "That did not work.", response.ok ? {} : { kind: "warn" });
        if (response.ok && onUndone) onUndone();
      } catch (e) {
        button.disabled = false;
        HITL.toast("Network error; try again.", { kind: "warn" });
      }
    });
  };
  document.querySelectorAll("#toasts .undo-toast[data-seconds]").forEach(function (el) {
    armUndo(el, parseFloat(el.dataset.seconds) || 0);
  });

  // --- live indicator over all of this page's sockets -----------------------------
  const states = {};
  function indicate(name, state) {
    states[name] = state;
    const el = document.getElementById("live-indicator");
    if (!el) return;
    const values = Object.values(states);
    const overall = values.every(function (s) { return s === "live"; })
      ? "live"
      : values.some(function (s) { return s === "offline"; }) ? "offline" : "connecting";
    el.dataset.state = overall;
    el.querySelector(".label").textContent = overall === "offline" ? "reconnecting" : overall;
  }

  // A socket that reconnects with backoff and tells the page when to resync: every
  // "hello" after the first means events may have been missed while it was down.
  HITL.connect = function (name, path, handlers) {
    let socket = null;
    let attempts = 0;
    let opened = false;
    let stopped = false;
    let refused = false;
    let pinger = null;
    function open() {
      indicate(name, opened ? "offline" : "connecting");
      const scheme = location.protocol === "https:" ? "wss://" : "ws://";
      socket = new WebSocket(scheme + location.host + path);
      socket.onmessage = function (event) {
        let message;
        try { message = JSON.parse(event.data); } catch (e) { return; }
        if (message.type === "hello") {
          refused = false;
          const resync = opened;
          opened = true;
          attempts = 0;
          indicate(name, "live");
          if (handlers.open) handlers.open({ resync: resync });
          return;
        }
        if (message.type === "pong") return;
        handlers.message(message);
      };
      socket.onclose = function (event) {
        clearInterval(pinger);
        if (stopped) return;
        indicate(name, "offline");
        attempts += 1;
        let delay = Math.min(10000, 400 * Math.pow(2, attempts - 1)) + Math.random() * 300;
        if (event.code === 4401 || event.code === 4403) {
          // Refused: logged out or no longer allowed. Say so once, ask again slowly.
          if (!refused) HITL.toast("Live updates stopped: you may have been logged out. Reload the page.", { kind: "warn", ms: 10000 });
          refused = true;
          delay = 30000;
        }
        setTimeout(open, delay);
      };
      pinger = setInterval(function () {
        if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ type: "ping" }));
      }, 25000);
    }
    open();
    return {
      get socket() { return socket; },
      drop: function () { if (socket) socket.close(); },
      stop: function () { stopped = true; if (socket) socket.close(); },
    };
  };

  // --- notifications (only after the reviewer says yes) ---------------------------
  const toggle = document.getElementById("notify-toggle");
  function refreshToggle() {
    if (!toggle) return;
    toggle.hidden = !("Notification" in window) || Notification.permission !== "default";
  }
  if (toggle) {
    refreshToggle();
    toggle.addEventListener("click", function () {
      Notification.requestPermission().then(refreshToggle);
    });
  }
  HITL.notify = function (title, body, href) {
    if (!("Notification" in window) || Notification.permission !== "granted") return false;
    try {
      const note = new Notification(title, { body: body || "", tag: href || title });
      note.onclick = function () { window.focus(); if (href) location.href = href; note.close(); };
      return true;
    } catch (e) {
      return false;
    }
  };

  // --- the inbox socket: on every page, for notifications and the inbox itself -----
  const body = document.body;
  if (body.dataset.inboxSocket) {
    HITL.inbox = HITL.connect("inbox", body.dataset.inboxSocket, {
      open: function (info) {
        document.dispatchEvent(new CustomEvent("hitl:inbox-open", { detail: info }));
      },
      message: function (message) {
        if (message.type === "interrupt.changed" && message.status === "pending" && message.notify) {
          const row = message.html ? HITL.fragment(message.html) : null;
          const href = row ? row.dataset.href : "/";
          const onInbox = !!document.getElementById("inbox");
          const onThread = document.getElementById("thread");
          const sameThread = onThread && onThread.dataset.thread === message.thread_id;
          if (document.hidden || (!onInbox && !sameThread)) {
            HITL.notify(message.notify.title, message.notify.body, href);
          }
          if (!onInbox && !sameThread) {
            HITL.toast("New request: " + message.notify.title, { href: href });
          }
        }
        document.dispatchEvent(new CustomEvent("hitl:inbox", { detail: message }));
      },
    });
  }

  // --- help and global keys --------------------------------------------------------
  const help = document.getElementById("help");
  function showHelp(show) {
    if (help) help.hidden = !show;
  }
  const helpToggle = document.getElementById("help-toggle");
  if (helpToggle) helpToggle.addEventListener("click", function () { showHelp(help.hidden); });
  if (help) {
    help.addEventListener("click", function (event) {
      if (event.target === help || event.target.hasAttribute("data-close-help")) showHelp(false);
    });
  }
  // Multi-key sequences ("g i") are handled here, before the page's own listeners (this
  // script runs first): the keys of a sequence never reach a page's single-key actions.
  let pendingG = null;
  function swallow(event) {
    event.preventDefault();
    event.stopImmediatePropagation();
  }
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape") {
      pendingG = null;
      if (help && !help.hidden) { showHelp(false); swallow(event); return; }
      if (HITL.isTyping(event)) event.target.blur();
      return;
    }
    if (HITL.isTyping(event) || event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.key === "Shift") return;
    if (pendingG) {
      clearTimeout(pendingG);
      pendingG = null;
      swallow(event);
      if (event.key === "i") location.href = HITL.inboxHref();
      return;
    }
    if (help && !help.hidden) {
      // The help covers the page: no key acts on what is behind it.
      if (event.key === "?") showHelp(false);
      swallow(event);
      return;
    }
    if (event.key === "?") { showHelp(true); swallow(event); return; }
    if (event.key === "g") {
      pendingG = setTimeout(function () { pendingG = null; }, 1500);
      swallow(event);
      return;
    }
    if (event.key === "n") {
      // The item the page offers by name, else the newest one nobody else is on.
      const offered = document.querySelector("#next-item a");
      swallow(event);
      location.href = offered ? offered.href : "/interrupts/next/";
      return;
    }
    // A held key repeats: never let that turn into a string of decisions.
    if (event.repeat) swallow(event);
  });

  // Items whose full args this tab has shown on a thread page (thread.js marks them).
  HITL.markSeen = function (id) {
    try { sessionStorage.setItem("hitl:seen:" + id, "1"); } catch (e) { /* storage off */ }
  };
  HITL.seenArgs = function (id) {
    try { return sessionStorage.getItem("hitl:seen:" + id) === "1"; } catch (e) { return false; }
  };

  // Decision keys act only on an item the reviewer can see selected.
  HITL.isVisiblySelected = function (el) {
    if (!el || !el.isConnected || !el.classList.contains("selected")) return false;
    const box = el.getBoundingClientRect();
    return box.height > 0 && box.bottom > 0 && box.top < window.innerHeight;
  };

  document.addEventListener("submit", function (event) {
    const form = event.target;
    if (form.dataset.confirm && !window.confirm(form.dataset.confirm)) event.preventDefault();
  });
})();
