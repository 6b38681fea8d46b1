// Analytics: changing the period reloads the page (no inline handlers: CSP script-src 'self').
for (const select of document.querySelectorAll("select[data-submit-on-change]")) {
  select.addEventListener("change", () => select.form.submit());
}
