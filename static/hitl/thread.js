// Reload the thread page when its status changes (the live UI replaces this).
(function () {
  const el = document.getElementById("thread");
  if (!el) return;
  let status = el.dataset.status;
  async function poll() {
    try {
      const res = await fetch(el.dataset.statusUrl, { headers: { Accept: "application/json" } });
      if (res.ok) {
        const data = await res.json();
        if (data.status !== status) { window.location.reload(); return; }
      }
    } catch (e) { /* offline: try again */ }
    setTimeout(poll, 1500);
  }
  if (status === "busy") setTimeout(poll, 500);
})();
