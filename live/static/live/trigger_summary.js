/* What started a run, for its first step (Observe #1) on the run page's timeline (execution.js):
 * a manual run's instruction is the step's text; a run started by a webhook, a schedule or an
 * event has none, and reads by the trigger's data the runtime observed (the step's tool_input:
 * agents/runtime/loop.py's _start). */
(function () {
    "use strict";

    function brief(value) {
        const text = JSON.stringify(value);
        return text.length > 120 ? text.slice(0, 119) + "…" : text;
    }

    window.AgentDeskTriggerSummary = function (step) {
        const data = step.tool_input;
        if (step.step_type !== "observe" || !data || typeof data !== "object") {
            return "";
        }
        if (data.schedule) {
            return "Started by the schedule " + data.schedule;
        }
        if (data.event_type) {
            return "Started by the event " + data.event_type;
        }
        return "payload" in data ? "Started by a webhook: " + brief(data.payload) : "Started with " + brief(data);
    };
})();
