// A run's diagrams (flow/diagrams/): each container names the JSON script holding its Mermaid
// text; the vendored Mermaid library (no network) draws it with securityLevel "strict".
//
// A diagram is drawn to fit its box's width (Mermaid's useMaxWidth: never wider than its natural
// size) unless that would shrink its text below MIN_FIT_SCALE, as on a phone: then it is drawn
// at full size and scrolls sideways inside its box. Its "Full size" / "Fit to width" button
// switches. window.flowDiagrams.draw(scope) draws boxes added later (the run page swaps its
// panels in when the run's status changes: live/static/live/execution.js).
(function () {
  "use strict";

  const MIN_FIT_SCALE = 0.5;
  let drawn = 0; // Mermaid needs an id per drawing, also across redraws

  function dark() {
    return document.documentElement.classList.contains("dark");
  }

  function naturalWidth(svg) {
    const box = svg.viewBox && svg.viewBox.baseVal;
    return box && box.width ? box.width : svg.getBoundingClientRect().width;
  }

  function setSize(box, full) {
    const svg = box.querySelector("svg");
    const toggle = box.parentElement.querySelector("[data-diagram-size]");
    if (!svg) {
      return;
    }
    const width = naturalWidth(svg);
    box.dataset.size = full ? "full" : "fit";
    svg.style.width = full ? width + "px" : "100%";
    svg.style.maxWidth = full ? "none" : width + "px";
    svg.style.height = "auto";
    if (toggle) {
      toggle.hidden = false;
      toggle.textContent = full ? "Fit to width" : "Full size";
      toggle.setAttribute("aria-pressed", full ? "true" : "false");
    }
  }

  function fits(box) {
    const svg = box.querySelector("svg");
    const style = getComputedStyle(box);
    const room = box.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    return !svg || room >= naturalWidth(svg) * MIN_FIT_SCALE;
  }

  async function draw(scope) {
    const mermaid = window.mermaid;
    const boxes = Array.from((scope || document).querySelectorAll("[data-flow-diagram]")).filter(
      (box) => !box.dataset.rendered,
    );
    if (!mermaid || !boxes.length) {
      return;
    }
    mermaid.initialize({
      startOnLoad: false,
      securityLevel: "strict",
      theme: dark() ? "dark" : "default",
      // A long run's sequence outgrows the default 50,000 characters; the text is the server's.
      maxTextSize: 2000000,
      // width 100%, max-width the natural width: setSize switches between that and full size.
      sequence: { useMaxWidth: true, showSequenceNumbers: false },
      state: { useMaxWidth: true },
    });
    for (const box of boxes) {
      const source = document.getElementById(box.dataset.flowDiagram);
      if (!source) {
        continue;
      }
      drawn += 1;
      box.dataset.rendered = "drawing";
      try {
        const text = JSON.parse(source.textContent);
        // Drawn inside its own scrolling box: without a container Mermaid draws at natural
        // width in a temporary element appended to <body>, and a phone's page scrolled
        // sideways until it was done.
        const { svg } = await mermaid.render("flow-diagram-svg-" + drawn, text, box);
        box.innerHTML = svg;
        setSize(box, !fits(box));
        box.dataset.rendered = "true";
      } catch (error) {
        box.textContent = "The diagram could not be drawn: " + (error && error.message);
        box.dataset.rendered = "error";
      }
    }
  }

  document.addEventListener("click", function (event) {
    const toggle = event.target.closest("[data-diagram-size]");
    const box = toggle && document.querySelector('[data-flow-diagram="' + toggle.dataset.diagramSize + '"]');
    if (box) {
      setSize(box, box.dataset.size !== "full");
    }
  });

  window.flowDiagrams = { draw: draw };

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", () => draw(document));
  } else {
    draw(document);
  }
})();
