// Site-wide behaviour. No inline scripts anywhere: the Content-Security-Policy forbids them.
"use strict";

(function () {
  // "Copy code" buttons: data-copy names the element whose text is copied (end page, screened-out page).
  document.addEventListener("click", function (event) {
    const button = event.target.closest && event.target.closest("[data-copy]");
    if (!button) return;
    const source = document.querySelector(button.getAttribute("data-copy"));
    if (!source) return;
    const text = source.textContent.trim();
    const status = button.parentElement.querySelector("[data-copy-status]");
    const done = function (message) { if (status) status.textContent = message; };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(function () { done("Copied."); }, function () { selectText(source); done("Press Ctrl+C to copy."); });
    } else {
      selectText(source);
      done(document.execCommand && document.execCommand("copy") ? "Copied." : "Press Ctrl+C to copy.");
    }
  });

  function selectText(node) {
    const range = document.createRange();
    range.selectNodeContents(node);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }

  // The end page sends the participant back to the crowd platform after a few seconds.
  function armRedirects(root) {
    (root || document).querySelectorAll("[data-redirect]:not([data-armed])").forEach(function (node) {
      node.setAttribute("data-armed", "");
      const seconds = parseInt(node.getAttribute("data-redirect-seconds") || "5", 10);
      window.setTimeout(function () { window.location.assign(node.getAttribute("data-redirect")); }, seconds * 1000);
    });
  }
  // A slug field suggested from a title (data-slug-from names the title input; the new-study
  // upload): Django's slugify in short, until the researcher types a slug of their own.
  document.addEventListener("input", function (event) {
    const title = event.target;
    if (!title.id) return;
    document.querySelectorAll('[data-slug-from="' + title.id + '"]').forEach(function (slug) {
      if (slug.dataset.edited) return;
      slug.value = title.value.normalize("NFKD").replace(/[^\w\s-]/g, "").trim().toLowerCase()
        .replace(/[-\s]+/g, "-").replace(/^[-_]+|[-_]+$/g, "").slice(0, 80);
    });
    if (title.hasAttribute("data-slug-from")) title.dataset.edited = title.value ? "1" : "";
  });
  // A form whose request takes seconds (data-busy: "Create the schedule", about 10 s): on submit its
  // button is disabled (no second submission) and its status line shows with an indeterminate bar.
  document.addEventListener("submit", function (event) {
    const form = event.target;
    if (!form.hasAttribute || !form.hasAttribute("data-busy") || event.defaultPrevented) return;
    const status = form.querySelector("[data-busy-status]");
    if (status) status.hidden = false;
    form.setAttribute("aria-busy", "true");
    form.querySelectorAll("button[type=submit]").forEach(function (button) {
      window.setTimeout(function () { button.disabled = true; }, 0);  // after the form's data is taken
    });
  });
  document.addEventListener("DOMContentLoaded", function () { armRedirects(document); });
  document.addEventListener("htmx:afterSettle", function (event) { armRedirects(event.target); });
})();
