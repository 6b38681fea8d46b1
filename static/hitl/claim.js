// Claims on thread cards: show "You are on it" / Release for my claim, "I'm on it" when
// free, and ask before deciding an item someone else is on.
(function () {
  "use strict";
  const me = document.body.dataset.user || "";

  function sync(root) {
    (root || document).querySelectorAll(".claim-bar").forEach(function (bar) {
      const who = bar.dataset.claimedBy || "";
      const mine = who !== "" && who === me;
      const chip = bar.querySelector("[data-claim-chip]");
      if (chip) {
        if (chip.hidden !== (who === "")) chip.hidden = who === "";
        chip.classList.toggle("mine", mine);
        const label = chip.querySelector("[data-claim-who]");
        const text = mine ? "You are on it" : who + " is on it";
        // Only on change: a write would wake the observer below again.
        if (label && label.textContent !== text) label.textContent = text;
      }
      const take = bar.querySelector('[data-claim="take"]');
      const release = bar.querySelector('[data-claim="release"]');
      if (take && take.hidden !== (who !== "")) take.hidden = who !== "";
      if (release && release.hidden !== !mine) release.hidden = !mine;
    });
  }

  document.addEventListener("submit", function (event) {
    const form = event.target;
    if (!form.classList || !form.classList.contains("decision")) return;
    const card = form.closest("article.interrupt");
    const bar = card && card.querySelector(".claim-bar");
    const who = bar ? bar.dataset.claimedBy || "" : "";
    if (who && who !== me && !window.confirm(who + " is on it. Decide anyway?")) {
      event.preventDefault();
      event.stopImmediatePropagation();
    }
  }, true);

  // Socket-rendered cards replace the old ones: label them for this user too.
  new MutationObserver(function () { sync(); }).observe(document.body, { childList: true, subtree: true });
  sync();
})();
