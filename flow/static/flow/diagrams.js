// A run's diagrams (flow/diagrams/): each container names the JSON script holding its Mermaid
// text; the vendored Mermaid library (no network) draws it with securityLevel "strict".
(function () {
  "use strict";

  function dark() {
    return document.documentElement.classList.contains("dark");
  }

  async function draw() {
    const mermaid = window.mermaid;
    const boxes = document.querySelectorAll("[data-flow-diagram]");
    if (!mermaid || !boxes.length) {
      return;
    }
    mermaid.initialize({
      startOnLoad: false,
      securityLevel: "strict",
      theme: dark() ? "dark" : "default",
      // A long run's sequence outgrows the default 50,000 characters; the text is the server's.
      maxTextSize: 2000000,
      // Natural width: the container scrolls sideways on a small screen instead of shrinking
      // the text to nothing.
      sequence: { useMaxWidth: false, showSequenceNumbers: false },
      state: { useMaxWidth: false },
    });
    let n = 0;
    for (const box of boxes) {
      const source = document.getElementById(box.dataset.flowDiagram);
      if (!source) {
        continue;
      }
      n += 1;
      try {
        const text = JSON.parse(source.textContent);
        // Drawn inside its own scrolling box: without a container Mermaid draws at natural
        // width in a temporary element appended to <body>, and a phone's page scrolled
        // sideways until it was done.
        const { svg } = await mermaid.render("flow-diagram-svg-" + n, text, box);
        box.innerHTML = svg;
        box.dataset.rendered = "true";
      } catch (error) {
        box.textContent = "The diagram could not be drawn: " + (error && error.message);
        box.dataset.rendered = "error";
      }
    }
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
