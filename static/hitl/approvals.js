// Four-eyes progress ("1 of 2 approvals") on cards and inbox rows, live; and Approve
// disabled, with the reason, for whoever may not give the next approval.
(function () {
  "use strict";
  const HITL = (window.HITL = window.HITL || {});
  const me = document.body.dataset.user || "";

  // Why this user may not approve the card's args now ("" when they may).
  function refusal(card) {
    if (!(parseInt(card.dataset.fourEyes, 10) > 1)) return "";
    if (me && card.dataset.requestedBy === me && !card.dataset.selfApproval) {
      return "You requested this thread, so you cannot approve its actions: the approvals must come from other reviewers. You can still respond or ignore.";
    }
    if (card.dataset.approveRefused) return card.dataset.approveRefused;
    const box = card.querySelector(".approvals");
    const names = box ? (box.dataset.names || "").split(" ") : [];
    if (me && names.indexOf(me) >= 0) {
      return "You have approved these args already: the next approval must come from another reviewer.";
    }
    return "";
  }
  HITL.syncApprove = function (card) {
    if (!card || !card.querySelector) return;
    const reason = refusal(card);
    card.querySelectorAll(".btn-accept, .btn-edit").forEach(function (button) {
      if (reason) {
        button.dataset.refused = "1";
        button.disabled = true;
        button.title = reason;
      } else if (button.dataset.refused) {
        delete button.dataset.refused;
        button.removeAttribute("title");
        const note = card.querySelector(".respond textarea");
        button.disabled = !!note && note.value.trim() !== "";
      }
    });
    let said = card.querySelector(".approve-refusal");
    if (reason && !said) {
      said = document.createElement("p");
      said.className = "approve-refusal small";
      said.setAttribute("role", "note");
      const buttons = card.querySelector(".buttons");
      if (buttons) buttons.after(said); else return;
    }
    if (said) {
      if (reason) said.textContent = reason; else said.remove();
    }
  };

  function apply(message) {
    if (!message || message.type !== "interrupt.progress") return;
    const text = message.approvals + " of " + message.required + " approvals";
    document.querySelectorAll('[data-approvals-for="' + message.interrupt_id + '"]').forEach(function (el) {
      const count = el.matches("[data-approvals-count]") ? el : el.querySelector("[data-approvals-count]");
      if (count) count.textContent = text;
      if (el.classList.contains("approvals")) el.dataset.names = message.approvers.join(" ");
      const who = el.querySelector("[data-approvers]");
      if (who) {
        who.textContent = message.approvers.length
          ? "approved by " + message.approvers.join(", ")
          : "needs " + message.required + " different reviewers";
      }
    });
    HITL.syncApprove(document.getElementById("interrupt-" + message.interrupt_id));
  }

  HITL.approvalProgress = apply;
  document.addEventListener("hitl:inbox", function (event) { apply(event.detail); });
})();
