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

  // The sidebar's other runs: while any of them is under way, their states are asked for
  // every few seconds, all in one request, and each entry shows the state it is in now. The
  // page's own run is the live stream's.
  const sidebar = document.getElementById("threads");
  if (sidebar) {
    const underWay = new Set(["running", "stopping"]);
    const own = current ? current.dataset.id : null;
    const refresh = async () => {
      if (document.hidden) return;
      const entries = Array.from(sidebar.querySelectorAll("li[data-id]")).filter((entry) => {
        const shown = entry.querySelector(".thread-status");
        return entry.dataset.id !== own && shown && underWay.has(shown.textContent);
      });
      if (!entries.length) return;
      const query = new URLSearchParams(entries.map((entry) => ["id", entry.dataset.id]));
      let statuses;
      try {
        const reply = await fetch(`/statuses?${query}`, { headers: { Accept: "application/json" } });
        if (!reply.ok) return;
        statuses = (await reply.json()).statuses;
      } catch (error) {
        return; // asked again next time
      }
      for (const entry of entries) {
        const shown = entry.querySelector(".thread-status");
        const now = statuses[entry.dataset.id];
        // A listing says "running" until the run ends: it never undoes "stopping".
        if (!now || now === shown.textContent) continue;
        if (now === "running" && shown.textContent === "stopping") continue;
        shown.textContent = now;
      }
    };
    setInterval(refresh, 4000);
  }

  // The section links stay at the top as the page scrolls: a link to a section leaves its
  // heading just below them, however many lines they take (on a phone, two).
  const sectionLinks = document.querySelector("#current nav.sections");
  if (sectionLinks) {
    const keepBelow = () =>
      document.documentElement.style.setProperty("--nav-height", `${sectionLinks.offsetHeight}px`);
    new ResizeObserver(keepBelow).observe(sectionLinks);
    keepBelow();
  }

  // A table wider than its place (the review matrix on a phone) scrolls in its own box and
  // says so: the line above it shows, and the box's edge fades on the side where more lies.
  // Looked at again whenever a box or its table changes size (a critique opened in a cell),
  // is scrolled, or comes with the live stream.
  const watched = new WeakSet();
  const sized = new ResizeObserver((entries) => {
    for (const entry of entries) markScroll(entry.target.closest(".scroll"));
  });
  function markScroll(box) {
    if (!box) return;
    const wider = box.scrollWidth - box.clientWidth > 1;
    box.classList.toggle("more-left", wider && box.scrollLeft > 1);
    box.classList.toggle(
      "more-right",
      wider && box.scrollLeft + box.clientWidth < box.scrollWidth - 1,
    );
    const hint = box.previousElementSibling;
    if (hint && hint.classList.contains("scroll-hint")) hint.hidden = !wider;
  }
  function markScrolls() {
    for (const box of document.querySelectorAll(".scroll")) {
      if (!watched.has(box)) {
        watched.add(box);
        sized.observe(box);
        if (box.firstElementChild) sized.observe(box.firstElementChild);
        box.addEventListener("scroll", () => markScroll(box), { passive: true });
      }
      markScroll(box);
    }
  }
  markScrolls();

  const live = document.getElementById("live");
  if (!live || live.hidden) return;
  const events = document.getElementById("events");
  const seen = new Set(Array.from(events.children, (item) => Number(item.dataset.seq)));

  // A section the stream sent is morphed into place (idiomorph): only what changed is
  // touched, so a button under the pointer stays the same element and a click on it lands
  // however often the section is updated. What the user set is theirs: the text typed in a
  // field, the member chosen in a select, which folds are open.
  const userState = {
    beforeNodeMorphed(node) {
      if (node instanceof HTMLTextAreaElement) return false;
      if (node instanceof HTMLInputElement && node.type !== "hidden") return false;
      return true;
    },
    beforeAttributeUpdated(name, node) {
      if (name === "open" && node instanceof HTMLDetailsElement) return false;
      if (name === "selected" && node instanceof HTMLOptionElement) return false;
      return true;
    },
  };

  function swap(id, html) {
    const region = document.getElementById(id);
    if (!region) return;
    const select = region.querySelectorAll("select[id]");
    const chosen = new Map(Array.from(select, (field) => [field.id, field.value]));
    Idiomorph.morph(region, html, { morphStyle: "innerHTML", callbacks: userState });
    for (const [id, value] of chosen) {
      const field = document.getElementById(id);
      if (field && Array.from(field.options).some((option) => option.value === value)) {
        field.value = value;
      }
    }
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
    markScrolls();
    live.dataset.state = data.state;
  };
  source.addEventListener("end", () => {
    source.close();
    live.hidden = true;
  });
})();
