// The live part of a deliberation's page: progress from the server's event stream.
// Every text goes in with textContent: model text is never read as HTML.
"use strict";

(function () {
  const live = document.getElementById("live");
  if (!live) return;

  const where = document.getElementById("where");
  const statuses = document.getElementById("statuses");
  const partials = document.getElementById("partials");
  const events = document.getElementById("events");
  const seen = new Set();

  function element(tag, text, className) {
    const node = document.createElement(tag);
    if (text !== undefined) node.textContent = text;
    if (className) node.className = className;
    return node;
  }

  function showStatuses(states) {
    statuses.replaceChildren(
      ...Object.entries(states).map(([model, state]) => {
        const row = element("tr");
        row.append(element("td", model), element("td", state, "state-" + state));
        row.dataset.model = model;
        return row;
      })
    );
  }

  function showPartials(replies) {
    // A reply that is no longer being written is in the record now (or was cancelled).
    const writing = new Set(replies.map((reply) => reply.model));
    for (const box of partials.querySelectorAll("article")) {
      if (!writing.has(box.dataset.model)) box.remove();
    }
    for (const reply of replies) {
      let box = partials.querySelector(`article[data-model="${CSS.escape(reply.model)}"]`);
      if (!box) {
        box = element("article");
        box.dataset.model = reply.model;
        box.append(element("h3"), element("pre", "", "partial"));
        partials.append(box);
      }
      box.querySelector("h3").textContent = `${reply.model} · ${reply.where} · ${reply.bytes} bytes so far`;
      box.querySelector("pre").textContent = reply.text;
    }
  }

  const source = new EventSource(live.dataset.stream);
  source.onmessage = (message) => {
    const data = JSON.parse(message.data);
    if (data.waiting) {
      where.textContent = "waiting for a worker to pick the deliberation up…";
      return;
    }
    for (const event of data.events) {
      if (seen.has(event.seq)) continue;
      seen.add(event.seq);
      events.append(element("li", event.line));
    }
    const round = `refinement round ${data.round} of ${data.max_rounds} (at least ${data.min_rounds})`;
    const cost = data.cost === null ? "cost not reported" : `$${data.cost.toFixed(4)}`;
    where.textContent = `${data.stage || "starting"} · ${round} · ${data.tokens.toLocaleString()} tokens · ${cost}`;
    showStatuses(data.statuses);
    showPartials(data.partials);
    if (data.finished) {
      where.textContent += " · finished: " + data.reason;
    }
  };
  source.addEventListener("end", () => {
    source.close();
    window.location.reload();
  });
})();
