// Every signed-in page: the header's menu on narrow screens.
(function () {
  "use strict";
  const header = document.getElementById("top");
  const toggle = document.getElementById("menu-toggle");
  if (!header || !toggle) return;

  function setOpen(open) {
    header.classList.toggle("menu-open", open);
    toggle.setAttribute("aria-expanded", open ? "true" : "false");
  }
  toggle.addEventListener("click", function () {
    setOpen(!header.classList.contains("menu-open"));
  });
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape" && header.classList.contains("menu-open")) {
      setOpen(false);
      toggle.focus();
    }
  });
  document.addEventListener("click", function (event) {
    if (header.classList.contains("menu-open") && !header.contains(event.target)) setOpen(false);
  });
})();
