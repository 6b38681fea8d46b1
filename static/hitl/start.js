// New thread: show the chosen graph's fields, and switch between the form and raw JSON.
(function () {
  "use strict";
  const form = document.getElementById("start-form");
  const holder = document.getElementById("start-fields");
  const graph = document.getElementById("id_graph");
  if (!form || !holder || !graph) return;

  function mode() {
    const checked = form.querySelector("input[name=mode]:checked");
    return checked ? checked.value : "json";
  }

  // The fields' current values as the JSON object the server would build from them.
  function fieldsAsJson() {
    const out = {};
    form.querySelectorAll("#start-form-fields [data-key]").forEach(function (el) {
      const key = el.dataset.key, type = el.dataset.type, value = el.value;
      if (type === "boolean" && el.type === "checkbox") { out[key] = el.checked; return; }
      if (value === "" || value === "unknown") return;
      try {
        if (type === "message") out[key] = [{ role: "user", content: value.trim() }];
        else if (type === "lines") out[key] = value.split("\n").map(function (s) { return s.trim(); }).filter(Boolean);
        else if (type === "boolean") out[key] = value === "true";
        else if (type === "integer" || type === "number" || type === "choice" || type === "json") out[key] = JSON.parse(value);
        else out[key] = value;
      } catch (e) { out[key] = value; }
    });
    return out;
  }

  function applyMode() {
    const fields = document.getElementById("start-form-fields");
    const raw = document.getElementById("start-json");
    if (!fields || !raw) return;
    const json = mode() === "json";
    const textarea = raw.querySelector("textarea");
    if (json && fields.hidden === false && textarea && ["", "{}"].indexOf(textarea.value.trim()) >= 0) {
      textarea.value = JSON.stringify(fieldsAsJson(), null, 2);
    }
    fields.hidden = json;
    raw.hidden = !json;
    // The refusal speaks of the fields of the view it was sent from: only there.
    const banner = form.querySelector(".form-error[data-mode]");
    if (banner) banner.hidden = banner.dataset.mode !== mode();
  }

  form.addEventListener("change", function (event) {
    if (event.target.name === "mode") applyMode();
  });

  graph.addEventListener("change", async function () {
    const url = form.dataset.fieldsUrl + "?partial=1&graph=" + encodeURIComponent(graph.value);
    holder.setAttribute("aria-busy", "true");
    try {
      const response = await fetch(url, { credentials: "same-origin" });
      if (response.ok) {
        holder.innerHTML = await response.text();
        // Another graph's fields: the refusal was about the previous one's.
        const banner = form.querySelector(".form-error");
        if (banner) banner.hidden = true;
      }
      else location.assign(form.dataset.fieldsUrl + "?graph=" + encodeURIComponent(graph.value));
    } catch (e) {
      location.assign(form.dataset.fieldsUrl + "?graph=" + encodeURIComponent(graph.value));
    } finally {
      holder.removeAttribute("aria-busy");
    }
  });
})();
