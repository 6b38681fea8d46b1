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
