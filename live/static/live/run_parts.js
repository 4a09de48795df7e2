/* The parts of the run page's live view (execution.js) that hold no state of their own: the
 * page's data, DOM and number helpers, the page refresh that swaps in the admin's fields, and one
 * timeline step drawn with its details and actions. ``run`` is the live view's context:
 * ``stepsUrl`` (a step's row in the admin, by number), ``stepActions`` (panels.RUN_STEP_ACTIONS)
 * and ``status()`` (the run's status as the socket last said). Loaded before execution.js. */
(function () {
    "use strict";

    const TERMINAL = ["completed", "failed", "cancelled", "timed_out"];

    // A JSON value the page carries in a <script type="application/json"> (json_script).
    function pageData(id, fallback) {
        const node = document.getElementById(id);
        try {
            return node ? JSON.parse(node.textContent) : fallback;
        } catch (error) {
            return fallback;
        }
    }

    function el(tag, className, text) {
        const node = document.createElement(tag);
        if (className) {
            node.className = className;
        }
        if (text !== undefined && text !== null) {
            node.textContent = String(text);
        }
        return node;
    }

    function pretty(value) {
        if (value === null || value === undefined) {
            return "";
        }
        return typeof value === "string" ? value : JSON.stringify(value, null, 2);
    }

    // A cost as every other page shows one (usage/templatetags/usage_format.py's usd): cents,
    // or an amount under a cent as kept, to the millionth ($0.000969), so that the run's cost
    // reads here as in the lists, the agent's page and daily usage.
    function money(value) {
        const number = Number(value || 0);
        if (number !== 0 && Math.abs(number) < 0.01) {
            return "$" + String(Number(number.toFixed(6)));
        }
        return "$" + number.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 });
    }

    function itemUrl(template, id) {
        return template.replace(/[0-]{8}-[0-]{4}-[0-]{4}-[0-]{4}-[0-]{12}/, encodeURIComponent(id));
    }

    function time(iso) {
        return iso ? new Date(iso).toLocaleTimeString() : "";
    }

    /* Re-fetches the page and swaps in its form (the fields and panels below the live view);
     * ``onDone(status)`` gets the status it was drawn with (null when the answer was not the
     * page, e.g. a login form). */
    function refreshPage(root, onDone) {
        const form = document.getElementById(root.dataset.form);
        fetch(window.location.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
            .then((response) => (response.ok ? response.text() : ""))
            .then(function (html) {
                const doc = new DOMParser().parseFromString(html, "text/html");
                const fresh = doc.getElementById(root.dataset.form);
                const drawn = doc.querySelector('#live-run [data-field="status"]');
                if (!form || !fresh || !drawn) {
                    onDone(null);
                    return;
                }
                // The page's scripts are loaded already (the diagrams' are called below).
                fresh.querySelectorAll("script[src]").forEach((node) => node.remove());
                // What the reader opened (collapsed sections) and where they are stay as they were.
                const open = Array.from(form.querySelectorAll("details"), (node) => node.open);
                const scroll = window.scrollY;
                form.replaceChildren(...Array.from(fresh.childNodes, (node) => document.importNode(node, true)));
                form.querySelectorAll("details").forEach(function (node, index) {
                    if (index < open.length) {
                        node.open = open[index];
                    }
                });
                // Scripts swapped in do not run: the diagrams are drawn by flow/diagrams.js's hook.
                if (window.flowDiagrams) {
                    window.flowDiagrams.draw(form);
                }
                window.scrollTo(0, scroll);
                onDone(drawn.dataset.status);
            })
            .catch(function () {
                onDone(null);
            });
    }

    function block(label, value, kind) {
        const wrapper = el("div", "live-block" + (kind ? " live-block--" + kind : ""));
        wrapper.append(el("div", "live-block__label", label));
        wrapper.append(el("pre", "live-block__body", pretty(value)));
        return wrapper;
    }

    // The links of one step (panels.RUN_STEP_ACTIONS): the step's row in the admin, and each
    // action where its rule says it applies (flow's "Retry from here": an ended run's steps
    // but the first).
    function drawActions(item, run) {
        const links = item.querySelector(".live-step__links");
        const number = Number(item.dataset.step);
        links.replaceChildren();
        if (run.stepsUrl) {
            const row = el("a", "", "Step in the admin");
            row.href = run.stepsUrl + number;
            links.append(row);
        }
        for (const action of run.stepActions) {
            const applies = action.step_types.includes(item.dataset.stepType)
                && (action.first_step || number !== 1)
                && (!action.ended_only || TERMINAL.includes(run.status()));
            if (applies) {
                const link = el("a", "live-step__action", action.label);
                link.href = action.url.replace(action.placeholder, String(number));
                links.append(link);
            }
        }
    }

    function drawStep(event, run) {
        const step = event.data;
        const item = el("li", "live-step live-step--" + step.step_type + (step.failed ? " live-step--failed" : ""));
        item.dataset.seq = event.seq;
        item.dataset.step = step.step_number;
        item.dataset.stepType = step.step_type;
        const details = el("details", "live-step__details");
        const head = el("summary", "live-step__head");
        head.append(el("span", "live-step__kind", step.step_type));
        head.append(el("span", "live-step__number", "#" + step.step_number));
        if (step.tool_name) {
            head.append(el("code", "live-step__tool", step.tool_name));
        }
        if (step.failed) {
            head.append(el("span", "live-step__failed", "failed"));
        }
        const preview = step.failed ? step.error : step.text || window.AgentDeskTriggerSummary(step);
        if (preview) {
            head.append(el("span", "live-step__preview", String(preview).split("\n")[0]));
        }
        const meta = [];
        if (step.model) {
            meta.push(step.model);
        }
        if (step.tokens_input || step.tokens_output) {
            meta.push(step.tokens_input + " in / " + step.tokens_output + " out");
        }
        if (Number(step.cost_usd) > 0) {
            meta.push(money(step.cost_usd));
        }
        if (step.duration_ms !== null && step.duration_ms !== undefined) {
            meta.push(step.duration_ms + " ms");
        }
        meta.push(time(step.completed_at || step.started_at));
        head.append(el("span", "live-step__meta", meta.filter(Boolean).join(" · ")));
        details.append(head);
        const body = el("div", "live-step__body");
        if (step.text) {
            body.append(el("p", "live-step__text", step.text));
        }
        if (step.step_type === "observe" && step.tool_input) {
            body.append(block("Trigger data", step.tool_input)); // trigger_summary.js reads it
        } else if (step.step_type === "act") {
            body.append(block("Arguments", step.tool_input));
            if (step.failed) {
                body.append(block("Error", step.error || step.tool_output, "error"));
            } else if (step.tool_output !== null && step.tool_output !== undefined) {
                body.append(block("Result", step.tool_output));
            }
        }
        body.append(el("p", "live-step__links"));
        details.append(body);
        item.append(details);
        drawActions(item, run);
        return item;
    }

    window.AgentDeskRunParts = {
        TERMINAL, pageData, el, pretty, money, itemUrl, time, refreshPage, block, drawActions, drawStep,
    };
})();
