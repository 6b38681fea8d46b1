// Thread page history: load the steps when the section is opened, a page at a time.
(function () {
  "use strict";
  const history = document.getElementById("history");
  if (!history) return;
  const box = history.querySelector(".history-steps");
  const fallback = box.innerHTML;

  async function fetchSteps(url) {
    const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "text/html" } });
    if (!response.ok || response.redirected) throw new Error("history " + response.status);
    const holder = document.createElement("div");
    holder.innerHTML = await response.text();
    return holder;
  }

  function failed() {
    box.innerHTML = fallback;
    const note = document.createElement("p");
    note.className = "muted small";
    note.textContent = "The history could not be loaded here; the link opens it on its own page.";
    box.appendChild(note);
  }

  async function load() {
    box.setAttribute("aria-busy", "true");
    try {
      const holder = await fetchSteps(history.dataset.src);
      box.replaceChildren(...holder.childNodes);
    } catch (err) {
      failed();
    }
    box.setAttribute("aria-busy", "false");
  }

  history.addEventListener("toggle", function () {
    if (history.open) load();  // again on each opening: the thread may have moved on
  });
  box.addEventListener("click", async function (event) {
    const more = event.target.closest("a[data-more]");
    if (!more) return;
    event.preventDefault();
    more.setAttribute("aria-disabled", "true");
    box.setAttribute("aria-busy", "true");
    try {
      const holder = await fetchSteps(more.dataset.more);
      const list = box.querySelector("ol.checkpoints");
      const items = holder.querySelector("ol.checkpoints");
      if (list && items) list.append(...items.children);
      more.parentElement.replaceWith(...Array.from(holder.children).filter(function (el) {
        return !el.matches("ol.checkpoints");
      }));
    } catch (err) {
      window.location.href = more.href;
    }
    box.setAttribute("aria-busy", "false");
  });
  // A step's whole state is fetched when its editor is opened.
  box.addEventListener("toggle", async function (event) {
    const details = event.target;
    if (!details.open || !details.dataset || !details.dataset.stateSrc) return;
    const pending = details.querySelector("[data-state-pending]");
    if (!pending) return;
    try {
      const holder = await fetchSteps(details.dataset.stateSrc);
      const pre = holder.querySelector("pre.state-json");
      if (pre) pending.replaceWith(pre);
    } catch (err) {
      pending.textContent = "The state could not be loaded; reopen to try again.";
    }
  }, true);
  if (history.open) load();
})();
