// Inbox: keyboard selection, quick accept/ignore, filters, and live rows.
(function () {
  "use strict";
  const HITL = window.HITL;
  const inbox = document.getElementById("inbox");
  if (!HITL || !inbox) return;
  const filters = document.getElementById("filters");
  let selected = -1;
  // Screen readers hear where the j / k selection is.
  const announcer = document.createElement("p");
  announcer.id = "inbox-announcer";
  announcer.className = "visually-hidden";
  announcer.setAttribute("aria-live", "polite");
  inbox.before(announcer);

  function rows() {
    return Array.prototype.slice.call(inbox.querySelectorAll("tbody tr.row"));
  }
  function select(index, scroll, focus) {
    const list = rows();
    list.forEach(function (row) { row.classList.remove("selected"); row.removeAttribute("aria-selected"); });
    if (!list.length) { selected = -1; return; }
    selected = Math.max(0, Math.min(index, list.length - 1));
    const row = list[selected];
    row.classList.add("selected");
    row.setAttribute("aria-selected", "true");
    if (scroll !== false) row.scrollIntoView({ block: "nearest" });
    if (focus) {
      // The row's link takes the focus: Tab and j / k agree on where the reviewer is.
      const link = row.querySelector("a.title");
      if (link && document.activeElement !== link) link.focus({ preventScroll: scroll === false });
      const title = link ? link.textContent.replace(/\s+/g, " ").trim() : "";
      announcer.textContent = "Selected: " + title + ", " + (selected + 1) + " of " + list.length + ".";
    }
  }
  function current() {
    // The highlighted row, never merely the one at the remembered index.
    return inbox.querySelector("tbody tr.row.selected");
  }
  function syncEmpty() {
    const empty = document.getElementById("inbox-empty");
    if (empty) empty.hidden = rows().length > 0;
  }
  function setCount(delta, absolute) {
    ["pending-badge", "pending-total"].forEach(function (id) {
      const el = document.getElementById(id);
      if (!el) return;
      const value = absolute !== undefined ? absolute : Math.max(0, parseInt(el.textContent, 10) + delta);
      el.textContent = String(value);
    });
  }

  function removeRow(id) {
    const row = document.getElementById("row-" + id);
    if (!row || row.classList.contains("leaving")) return false;
    const wasSelected = row.classList.contains("selected");
    row.classList.add("leaving");
    setTimeout(function () {
      row.remove();
      syncEmpty();
      if (wasSelected) select(selected);
    }, 300);
    return true;
  }

  async function decide(row, type) {
    if (row.dataset.busy) return;  // one request per row, however often the key is pressed
    row.dataset.busy = "1";
    const body = new FormData();
    body.append("type", type);
    body.append("csrfmiddlewaretoken", HITL.csrfToken());
    try {
      const response = await fetch(row.dataset.decide, {
        method: "POST",
        body: body,
        headers: { Accept: "application/json" },
        credentials: "same-origin",
      });
      let data = {};
      try { data = await response.json(); } catch (e) { /* not JSON: said below */ }
      if (response.ok) {
        removeRow(row.dataset.id);
        HITL.undoToast(data.message || (type === "accept" ? "Accepted." : "Ignored."), data.undo);
      } else {
        delete row.dataset.busy;
        HITL.failureToast(response, data);
      }
    } catch (e) {
      delete row.dataset.busy;
      HITL.toast("Network error; try again.", { kind: "warn" });
    }
  }

  // --- keyboard and mouse ------------------------------------------------------------
  document.addEventListener("keydown", function (event) {
    if (HITL.isTyping(event) || event.ctrlKey || event.metaKey || event.altKey) return;
    const row = current();
    switch (event.key) {
      case "j": select(selected + 1, true, true); break;
      case "k": select(selected < 0 ? 0 : selected - 1, true, true); break;
      case "Enter": {
        // Enter on another link or button (the skip link, a tab) does what that one does.
        const own = event.target.closest && event.target.closest("a, button, summary");
        if (own && !own.closest("tr.row")) return;
        if (row) location.href = row.dataset.href; else return;
        break;
      }
      case "a":
      case "i": {
        if (!row || !row.dataset.decide) return;
        if (!HITL.isVisiblySelected(row)) {
          HITL.toast("Select an item first: j / k.", { kind: "warn" });
          break;
        }
        const type = event.key === "a" ? "accept" : "ignore";
        if ((row.dataset.allowed || "").split(" ").indexOf(type) < 0) {
          HITL.toast("This request does not allow " + type + ".", { kind: "warn" });
          break;
        }
        // Approving runs the args as proposed: ask once when the row leaves some unseen.
        if (type === "accept" && row.dataset.unseen && !HITL.seenArgs(row.dataset.id) &&
            !window.confirm("Approve " + row.dataset.action + " on “" + row.dataset.title + "” without seeing all its args?\n" +
              "Not shown here: " + row.dataset.unseen + ".\nOK approves as proposed; Cancel leaves it (Enter opens it).")) {
          break;
        }
        decide(row, type);
        break;
      }
      case "e":
      case "r": {
        if (!row || !row.dataset.decide) return;
        const wanted = event.key === "e" ? "edit" : "response";
        if ((row.dataset.allowed || "").split(" ").indexOf(wanted) < 0) {
          HITL.toast("This request does not allow " + (wanted === "edit" ? "edit" : "respond") + ".", { kind: "warn" });
          break;
        }
        sessionStorage.setItem("hitl:intent", JSON.stringify({ id: row.dataset.id, action: event.key === "e" ? "edit" : "response" }));
        location.href = row.dataset.href;
        break;
      }
      default: return;
    }
    event.preventDefault();
  });
  inbox.addEventListener("focusin", function (event) {
    const row = event.target.closest("tr.row");
    if (row) select(rows().indexOf(row), false, true);
  });
  inbox.addEventListener("click", function (event) {
    const row = event.target.closest("tr.row");
    if (!row || event.target.closest("a, button, input")) return;
    location.href = row.dataset.href;
  });
  if (filters) {
    // A clean address of what the filters show: bookmarked, shared, and where the
    // "Inbox" links and `g i` lead back to from other pages (HITL.inboxHref).
    filters.addEventListener("change", function () {
      const params = new URLSearchParams();
      new FormData(filters).forEach(function (value, key) {
        if (value !== "" && !(key === "order" && value === "newest")) params.set(key, value);
      });
      const query = params.toString();
      location.assign(location.pathname + (query ? "?" + query : ""));
    });
    HITL.rememberInbox(location.search);
    const toggle = document.getElementById("filters-toggle");
    if (toggle) {
      toggle.addEventListener("click", function () {
        const open = filters.classList.toggle("open");
        toggle.setAttribute("aria-expanded", open ? "true" : "false");
      });
    }
  }

  // --- live ---------------------------------------------------------------------------
  function matches(row) {
    const d = inbox.dataset;
    if (d.group && row.dataset.group !== d.group) return false;
    if (d.graph && row.dataset.graph !== d.graph) return false;
    if (d.clarification && row.dataset.clarification !== d.clarification) return false;
    if (d.mine && d.myGroups !== undefined) {
      if (d.myGroups.split(" ").indexOf(row.dataset.group) < 0) return false;
    }
    return true;
  }
  function place(row) {
    const tbody = inbox.querySelector("tbody");
    const newest = inbox.dataset.order !== "oldest";
    // Only the page that shows the newest (or, oldest-first, the last) items grows.
    if (newest && inbox.dataset.firstPage) tbody.insertBefore(row, tbody.firstChild);
    else if (!newest && !inbox.querySelector('a[rel="next"]')) tbody.appendChild(row);
    else return false;
    row.classList.add("fresh");
    syncEmpty();
    if (selected >= 0 && newest) selected += 1;
    return true;
  }

  // Rows someone else answered are said once per burst (a bulk decision answers many at
  // once), naming their threads: "sam answered 5 items on “Q3 report” (2), “Refund”…".
  const answered = {};
  let answeredTimer = null;
  function sayAnswered(who, row) {
    (answered[who] = answered[who] || []).push({
      title: row.dataset.title || "",
      action: row.dataset.action || "",
    });
    clearTimeout(answeredTimer);
    answeredTimer = setTimeout(function () {
      Object.keys(answered).forEach(function (name) {
        HITL.toast(answeredText(name, answered[name]), { ms: 8000 });
        delete answered[name];
      });
    }, 500);
  }
  function answeredText(who, items) {
    if (items.length === 1) {
      const item = items[0];
      return who + " answered " + (item.action ? item.action.replace(/_/g, " ") : "an item") + " on “" + item.title + "”.";
    }
    const counts = {};
    const titles = [];
    items.forEach(function (item) {
      if (!(item.title in counts)) { counts[item.title] = 0; titles.push(item.title); }
      counts[item.title] += 1;
    });
    const named = titles.slice(0, 6).map(function (title) {
      return "“" + title + "”" + (counts[title] > 1 ? " (" + counts[title] + ")" : "");
    });
    const rest = titles.length - named.length;
    return who + " answered " + items.length + " items on " + named.join(", ") +
      (rest > 0 ? " and " + rest + " more thread" + (rest > 1 ? "s" : "") : "") + ".";
  }

  // A row pushed to everyone does not know who set it aside: keep this reviewer's chip
  // (while the item stays with the group it was set aside in, as the list's query does).
  function carrySnoozed(from, to) {
    const chip = from.querySelector(".chip.snoozed");
    const slot = to.querySelector("[data-chips]");
    if (!chip || !slot || to.querySelector(".chip.snoozed")) return;
    if (from.dataset.group !== to.dataset.group) return;
    slot.append(" ", chip);
  }

  document.addEventListener("hitl:inbox", function (event) {
    const message = event.detail;
    const kind = inbox.dataset.kind;
    if (message.type === "interrupt.snoozed") {
      // Set aside or taken back, maybe in another tab: whether the row is listed, its
      // "snoozed until" chip and the count are this reviewer's own, read as a reload does.
      resync();
    } else if (message.type === "interrupt.changed") {
      if (message.status === "pending") {
        if (!message.html) return;
        if (pendingWhileFetching) pendingWhileFetching.add(message.interrupt_id);
        const existing = document.getElementById("row-" + message.interrupt_id);
        if (!existing && message.change) {
          // A claim or release of a row not listed here: it may be one this reviewer set
          // aside, which the row pushed to everyone cannot know. List again instead.
          resync();
          return;
        }
        if (!existing) setCount(1);
        if (kind !== "interrupts") return;
        const row = HITL.fragment(message.html);
        if (existing) {
          carrySnoozed(existing, row);
          existing.replaceWith(row);
        } else if (matches(row)) place(row);
      } else {
        setCount(-1);
        if (answeredWhileFetching) answeredWhileFetching.add(message.interrupt_id);
        const row = document.getElementById("row-" + message.interrupt_id);
        const who = message.responded_by;
        if (removeRow(message.interrupt_id) && who && who !== document.body.dataset.user) {
          sayAnswered(who, row);
        }
      }
    } else if (message.type === "thread.changed" && kind === "threads" && message.html) {
      const tab = inbox.dataset.tab;
      const fits = tab === "all" || tab === message.status;
      const existing = document.getElementById("row-" + message.thread_id);
      const row = HITL.fragment(message.html);
      if (existing && fits) existing.replaceWith(row);
      else if (existing) removeRow(message.thread_id);
      else if (fits && matches(row)) place(row);
    }
  });

  // After a dropped socket, fetch the list again: events may have been missed.
  // The first hello resyncs too: the page was rendered before the socket subscribed.
  // Items answered or pushed while the list is being fetched: the list may have been
  // rendered before, and must neither bring the answered back nor drop the pushed.
  let answeredWhileFetching = null;
  let pendingWhileFetching = null;
  document.addEventListener("hitl:inbox-open", function () { resync(); });
  async function resync() {
    const answeredNow = (answeredWhileFetching = new Set());
    const pendingNow = (pendingWhileFetching = new Set());
    let readAgain = false;
    try {
      const response = await fetch(inbox.dataset.partialUrl, { credentials: "same-origin" });
      if (!response.ok) return;
      const html = await response.text();
      // The selection as it is now: a key pressed while the list was fetched counts.
      const before = current();
      inbox.innerHTML = html;
      const sync = document.getElementById("pending-sync");
      if (sync) setCount(0, parseInt(sync.dataset.count, 10));
      answeredNow.forEach(function (id) {
        const stale = document.getElementById("row-" + id);
        if (stale) { stale.remove(); setCount(-1); }
      });
      // A row pushed meanwhile may be missing from (or older in) what was read: read
      // the list again, now that it is sure to hold it.
      readAgain = pendingNow.size > 0;
      const again = before ? document.getElementById(before.id) : null;
      if (again) selected = rows().indexOf(again);
      select(selected, false);
      syncEmpty();
    } catch (e) { /* the next reconnect tries again */ } finally {
      if (answeredWhileFetching === answeredNow) answeredWhileFetching = null;
      if (pendingWhileFetching === pendingNow) pendingWhileFetching = null;
    }
    if (readAgain) resync();
    else document.dispatchEvent(new CustomEvent("hitl:resynced"));
  }

  select(0, false);
})();
