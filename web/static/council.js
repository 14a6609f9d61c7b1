// The page's script. A refused form: its first error focused and scrolled into view. A
// running deliberation: its sections kept up to date from the server's event stream.
// The stream carries sections the server rendered from the page's own templates (every
// string escaped there, model text rendered safely); progress lines go in as text.
"use strict";

(function () {
  const invalid = document.querySelector('[aria-invalid="true"]');
  const current = document.querySelector(".conversation > .turn.current");
  if (invalid) {
    invalid.scrollIntoView({ block: "center" });
    invalid.focus({ preventScroll: true });
  } else if (current && current.previousElementSibling && !window.location.hash) {
    // A later turn of a conversation: its question at the top, the earlier ones above.
    current.scrollIntoView({ block: "start" });
  }

  // A refusal answers the request just sent: it goes once the user edits a form or sends
  // one again (what was typed stays in the form).
  const refused = document.getElementById("refused");
  if (refused) {
    const settled = (event) => {
      if (event.target instanceof Element && event.target.closest("form")) refused.remove();
    };
    document.addEventListener("input", settled);
    document.addEventListener("change", settled);
    document.addEventListener("submit", settled);
  }

  // Files dropped anywhere on the start form join the ones chosen in its file input.
  const start = document.getElementById("start-form");
  const picker = document.getElementById("attachments");
  if (start && picker) {
    const carriesFiles = (event) =>
      event.dataTransfer && Array.from(event.dataTransfer.types).includes("Files");
    start.addEventListener("dragover", (event) => {
      if (!carriesFiles(event)) return;
      event.preventDefault();
      start.classList.add("dropping");
    });
    start.addEventListener("dragleave", () => start.classList.remove("dropping"));
    start.addEventListener("drop", (event) => {
      start.classList.remove("dropping");
      if (!carriesFiles(event) || !event.dataTransfer.files.length) return;
      event.preventDefault();
      const all = new DataTransfer();
      for (const file of picker.files) all.items.add(file);
      for (const file of event.dataTransfer.files) all.items.add(file);
      picker.files = all.files;
      picker.dispatchEvent(new Event("change", { bubbles: true }));
    });
  }

  const live = document.getElementById("live");
  if (!live || live.hidden) return;
  const events = document.getElementById("events");
  const seen = new Set(Array.from(events.children, (item) => Number(item.dataset.seq)));

  // What a swap must not lose: which folds are open, what the user typed, where the
  // cursor is.
  function remember(region) {
    const open = new Map();
    for (const fold of region.querySelectorAll("details[data-key]")) {
      open.set(fold.dataset.key, fold.open);
    }
    const values = new Map();
    for (const field of region.querySelectorAll("input[id], textarea[id], select[id]")) {
      if (field.type !== "hidden") values.set(field.id, field.value);
    }
    const active = document.activeElement;
    const focused = active && active.id && region.contains(active) ? active : null;
    return {
      open,
      values,
      focused: focused && {
        id: focused.id,
        start: focused.selectionStart,
        end: focused.selectionEnd,
      },
    };
  }

  function restore(region, state) {
    for (const fold of region.querySelectorAll("details[data-key]")) {
      if (state.open.has(fold.dataset.key)) fold.open = state.open.get(fold.dataset.key);
    }
    for (const [id, value] of state.values) {
      const field = document.getElementById(id);
      if (!field || !region.contains(field)) continue;
      if (field.tagName === "SELECT") {
        if (Array.from(field.options).some((option) => option.value === value)) field.value = value;
      } else {
        field.value = value;
      }
    }
    if (state.focused) {
      const field = document.getElementById(state.focused.id);
      if (field) {
        field.focus({ preventScroll: true });
        if (typeof state.focused.start === "number" && field.setSelectionRange) {
          field.setSelectionRange(state.focused.start, state.focused.end);
        }
      }
    }
  }

  function swap(id, html) {
    const region = document.getElementById(id);
    if (!region) return;
    const state = remember(region);
    region.innerHTML = html;
    restore(region, state);
  }

  const source = new EventSource(live.dataset.stream);
  source.onmessage = (message) => {
    const data = JSON.parse(message.data);
    if (data.waiting) {
      const where = document.getElementById("where");
      if (where) where.textContent = "waiting for a worker to pick the deliberation up…";
      return;
    }
    for (const event of data.events) {
      if (seen.has(event.seq)) continue;
      seen.add(event.seq);
      const item = document.createElement("li");
      item.dataset.seq = event.seq;
      item.textContent = event.line;
      events.append(item);
    }
    for (const [id, html] of Object.entries(data.sections)) swap(id, html);
    live.dataset.state = data.state;
  };
  source.addEventListener("end", () => {
    source.close();
    live.hidden = true;
  });
})();
