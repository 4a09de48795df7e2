/* A state change's reason as a person reads it, on the run page's timeline (execution.js): a code
 * such as a stop reason ("final_answer") in words, as the state diagram has it; a worker's claim
 * as the runtime records it ("claimed by <worker id>", agents/runtime/store/claims.py) as
 * "picked up by a worker", the id kept for the line's tooltip; other free text (a person's
 * reason) as it is. */
(function () {
    "use strict";

    const WORKER = /^(claimed|resumed) by (\S+)( after .*)?$/;

    window.AgentDeskStateReason = function (text) {
        const worker = WORKER.exec(text);
        if (worker) {
            const verb = worker[1] === "claimed" ? "picked up" : "taken over";
            return { text: verb + " by a worker" + (worker[3] || ""), title: "Worker " + worker[2] };
        }
        return { text: /^[a-z]+(_[a-z]+)+$/.test(text) ? text.replace(/_/g, " ") : text, title: "" };
    };
})();
