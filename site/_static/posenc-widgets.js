// Static copies of the notebooks' widgets (scripts/site_widgets.py rendered every frame with
// posenc_lib at build time): a control picks the precomputed frame; no formula lives here.
// Frames are listed in row-major order of the controls (the last control varies fastest).
"use strict";
function posencWidget(root) {
  const frames = JSON.parse(root.dataset.frames);
  const img = root.querySelector("img.posenc-widget-frame");
  const controls = Array.from(root.querySelectorAll("[data-count]"));
  function show() {
    let index = 0;
    const parts = [];
    for (const c of controls) {
      const k = c.type === "checkbox" ? Number(c.checked) : Number(c.value);
      index = index * Number(c.dataset.count) + k;
      const labels = JSON.parse(c.dataset.labels);
      const out = c.parentElement.querySelector("output");
      if (out) out.textContent = labels[k];
      parts.push(c.dataset.name + " = " + labels[k]);
    }
    img.src = root.dataset.base + frames[index];
    img.alt = root.dataset.alt + " Settings: " + parts.join(", ") + ".";
  }
  for (const c of controls) {
    c.addEventListener("input", show);
    c.addEventListener("change", show);
  }
}
document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll(".posenc-widget").forEach(posencWidget);
});
