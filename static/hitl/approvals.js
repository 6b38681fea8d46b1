// Four-eyes progress ("1 of 2 approvals") on cards and inbox rows, live.
(function () {
  "use strict";
  window.HITL = window.HITL || {};

  function apply(message) {
    if (!message || message.type !== "interrupt.progress") return;
    const text = message.approvals + " of " + message.required + " approvals";
    document.querySelectorAll('[data-approvals-for="' + message.interrupt_id + '"]').forEach(function (el) {
      const count = el.matches("[data-approvals-count]") ? el : el.querySelector("[data-approvals-count]");
      if (count) count.textContent = text;
      if (message.edited && el.classList.contains("approvals") && !el.querySelector(".approval-args")) {
        // The edited args are server-rendered; say so rather than approve stale ones.
        if (!el.querySelector(".approval-edited")) {
          const note = document.createElement("p");
          note.className = "approval-edited form-error";
          note.textContent = "The args were edited and earlier approvals reset. Reload to review the new args.";
          el.appendChild(note);
        }
      }
      const who = el.querySelector("[data-approvers]");
      if (who) {
        who.textContent = message.approvers.length
          ? "approved by " + message.approvers.join(", ")
          : "needs " + message.required + " different reviewers";
      }
    });
  }

  HITL.approvalProgress = apply;
  document.addEventListener("hitl:inbox", function (event) { apply(event.detail); });
})();
