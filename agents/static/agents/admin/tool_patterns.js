// The agent editor's tool picker: picking a tool or a group adds its pattern to the
// comma-separated field named by data-tool-pattern-for; the field's input event then makes htmx
// refresh the preview of the tools the patterns allow.
document.addEventListener("change", (event) => {
  const picker = event.target.closest("select[data-tool-pattern-for]");
  if (!picker || !picker.value) {
    return;
  }
  const input = document.getElementById(picker.dataset.toolPatternFor);
  if (input) {
    const patterns = input.value.split(",").map((p) => p.trim()).filter(Boolean);
    if (!patterns.includes(picker.value)) {
      patterns.push(picker.value);
    }
    input.value = patterns.join(", ");
    input.dispatchEvent(new Event("input", { bubbles: true }));
  }
  picker.value = "";
});
