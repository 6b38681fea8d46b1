// Thread page: while a run works, say so, for how long, and in which node or tool.
(function () {
  "use strict";
  const root = document.getElementById("thread");
  const box = document.getElementById("run-progress");
  if (!root || !box) return;
  const elapsed = box.querySelector(".elapsed");
  const doing = box.querySelector(".doing");
  const outcome = document.getElementById("run-outcome");
  let since = null;
  // Follow the run this page was opened for (a new thread), or any run seen working here,
  // until it pauses (then link the item waiting for a decision) or ends.
  let following = root.dataset.follow === "1" || root.dataset.status === "busy";

  function busySince() {
    const status = document.querySelector("#section-status .status[data-status]");
    const stamp = status && status.dataset.since ? Date.parse(status.dataset.since) : NaN;
    return isNaN(stamp) ? Date.now() : Math.min(stamp, Date.now());
  }
  function format(ms) {
    const s = Math.max(0, Math.floor(ms / 1000));
    return s < 60 ? s + " s" : Math.floor(s / 60) + " min " + (s % 60) + " s";
  }
  function report() {
    if (!outcome || !following) return;
    const status = root.dataset.status;
    let html = "";
    if (status === "interrupted") {
      const card = document.querySelector("#interrupts article.interrupt");
      html = "<b>Paused:</b> the run waits for a decision." +
        (card ? ' <a class="button primary" href="#' + card.id + '">Go to the item</a>' : "");
    } else if (status === "done" || status === "idle") {
      html = "<b>Finished:</b> the run ended.";
    } else if (status === "error") {
      html = "<b>Failed:</b> the run stopped with an error (details below).";
    }
    if (outcome.dataset.html !== html) {
      outcome.dataset.html = html;
      outcome.innerHTML = html;
      outcome.classList.toggle("ended", status === "done" || status === "idle");
    }
    outcome.hidden = !html;
  }
  function tick() {
    const busy = root.dataset.status === "busy";
    if (busy) following = true;
    report();
    if (!busy) {
      since = null;
      box.hidden = true;
      doing.textContent = "";
      return;
    }
    if (since === null) since = busySince();
    box.hidden = false;
    elapsed.textContent = format(Date.now() - since);
  }
  function say(text) {
    if (doing.textContent !== text) doing.textContent = text;
  }
  document.addEventListener("hitl:thread-event", function (event) {
    const e = event.detail || {};
    if (e.type === "RUN_STARTED") { root.dataset.status = "busy"; since = since || Date.now(); say("starting"); }
    else if (e.type === "CUSTOM" && e.name === "hitl.node_started" && e.value) say("in " + e.value.node);
    else if (e.type === "TOOL_CALL_START") say("calling " + (e.toolCallName || "a tool"));
    else if (e.type === "TEXT_MESSAGE_START" || e.type === "TEXT_MESSAGE_CONTENT") say("writing a reply");
    tick();
  });
  setInterval(tick, 500);
  tick();
})();
