// The console's only script: live pages follow the server's event stream, and running calls' elapsed time ticks.
// Served from the package (no CDN, no build step); the Content-Security-Policy allows no other script.
"use strict";

function ago(seconds) {
  seconds = Math.max(seconds, 0);
  if (seconds < 90) return Math.round(seconds) + " s";
  if (seconds < 5400) return Math.round(seconds / 60) + " min";
  return (seconds / 3600).toFixed(1) + " h";
}

function tick() {
  const now = Date.now() / 1000;
  for (const cell of document.querySelectorAll(".elapsed[data-since]")) {
    cell.textContent = ago(now - parseFloat(cell.dataset.since));
  }
}

let pending = null;
async function refresh() {
  pending = null;
  const answer = await fetch(location.href, { credentials: "same-origin", headers: { Accept: "text/html" } });
  if (!answer.ok || answer.redirected) return;
  const page = new DOMParser().parseFromString(await answer.text(), "text/html");
  const fresh = page.querySelector("main");
  const main = document.querySelector("main");
  if (fresh && main) {
    main.replaceWith(fresh);
    tick();
    // A page that names what it shows beyond the board (the servers' state) follows from what it shows now.
    if (events && fresh.dataset.live && fresh.dataset.live.includes("&servers=")) {
      events.close();
      follow();
    }
  }
}

let events = null;
function follow() {
  const main = document.querySelector("main[data-live]");
  if (!main) return;
  events = new EventSource(main.dataset.live);
  events.addEventListener("change", () => {
    if (pending === null) pending = setTimeout(refresh, 150);
  });
}

document.addEventListener("DOMContentLoaded", () => {
  follow();
  tick();
  setInterval(tick, 1000);
});
