/* The live view of one execution (live/templates/live/execution_live.html).
 *
 * Connects to /ws/executions/<id>/ (same origin: the admin session authenticates it), draws the
 * snapshot into the header and each step and state change into the timeline, and grows the text
 * of the model call under way from "token" messages. Reconnects with backoff and asks only for
 * what it missed (?after=<last event number>), so nothing is drawn twice. Protocol:
 * docs/live-protocol.md.
 *
 * The timeline is the run's one list of steps and state changes: each step is a line (kind,
 * number, tool, a preview, figures) whose details (the text, the tool's arguments and result, a
 * link to the step's row, the steps' actions such as "Retry from here") unfold on a click.
 * A question to a person (ask_user) is drawn where it was asked, before the "Waiting for input"
 * it parked the run with (the snapshot's asked names that park's seq by the call's id): while it
 * waits as the call asked (from the snapshot's waiting), and its act step, written only when the
 * answer came (after the resume), takes that place; where the answer came, the resume's state
 * line shows it.
 *
 * What depends on the run's status follows the status the socket reports, at once: the badge,
 * the Run section's Status below (data-run-status), the page's title ("Execution <id>
 * (<status>)"), all named with the page's status labels (ExecutionStatus's), the
 * header's actions (Cancel goes, Replay shows when the run ends) and the steps' actions that
 * only an ended run has. The admin's fields below (and the panels among them) are the server's,
 * as of the page's load: when the status moves on from the one they were drawn with, the page
 * is fetched again (one request, never a reload) and the form is swapped in. */
(function () {
    "use strict";

    const BACKOFF_MIN_MS = 500;
    const BACKOFF_MAX_MS = 15000;
    const REFRESH_DELAY_MS = 300;
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

    function start(root) {
        const field = (name) => root.querySelector('[data-field="' + name + '"]');
        const conn = root.querySelector("[data-conn]");
        const timeline = field("timeline");
        // The inbox's pages of the item the run waits for (ids replace the zero UUID).
        const approvalUrl = root.dataset.approvalUrl || "";
        const questionUrl = root.dataset.questionUrl || "";
        const stepsUrl = root.dataset.stepsUrl || "";
        const labels = pageData("run-status-labels", {});
        const stepActions = pageData("run-step-actions", []);
        let title = root.dataset.title || ""; // the page's title as drawn: "Execution <id> (<status>)"
        let lastSeq = 0; // the last event drawn: a reconnect asks for what follows it
        let headerSeq = -1; // the snapshot's number: step costs after it are added to its totals
        let askedCall = ""; // the call waiting for a person's answer: the totals count it already
        const parkOf = {}; // the calls that asked a person, by id: the seq of the park each caused
        let totals = null;
        let status = field("status").dataset.status;
        let backoff = BACKOFF_MIN_MS;
        let streaming = null; // {stepNumber, node, body} of the model call under way
        // The status the server drew the rest of the page with, and the page refresh under way.
        let drawnStatus = status;
        let refreshing = false;
        let refreshTimer = null;
        let refreshFailures = 0;
        let refreshesBehind = 0; // refreshes in a row that found the run already moved on

        function setConn(state, label) {
            conn.dataset.conn = state;
            conn.textContent = label;
        }

        function label(value) {
            return labels[value] || value;
        }

        // The title's "(<status>)" (Execution.__str__), in the breadcrumb and the window's title.
        function setTitle(value) {
            const fresh = title.replace(/\([^()]*\)$/, "(" + label(value).toLowerCase() + ")");
            if (!title || fresh === title) {
                return;
            }
            const crumbs = document.querySelectorAll("#header-inner h1 a, #header-inner h1 span");
            for (const crumb of crumbs) {
                if (crumb.textContent.trim() === title) {
                    crumb.textContent = fresh;
                }
            }
            document.title = document.title.replace(title, fresh);
            title = fresh;
        }

        function setStatus(value) {
            const changed = value !== status;
            status = value;
            const badge = field("status");
            badge.dataset.status = value;
            badge.textContent = label(value);
            drawStatusFields();
            setTitle(value);
            if (TERMINAL.includes(value)) {
                // An ended run cannot be cancelled, and may be replayed.
                document.querySelectorAll("[data-run-tool=cancel]").forEach((node) => node.remove());
                document.querySelectorAll("[data-run-tool=replay]").forEach((node) => { node.hidden = false; });
            }
            if (changed) {
                timeline.querySelectorAll(".live-step[data-step]").forEach(drawActions);
            }
            if (value !== drawnStatus) {
                scheduleRefresh();
            }
        }

        // The fields below that name the status (the Run section's, data-run-status) say what
        // the badge says, whether or not the page's refetch of them has come back yet.
        function drawStatusFields() {
            document.querySelectorAll("[data-run-status]").forEach(function (node) {
                node.dataset.runStatus = status;
                node.textContent = label(status);
            });
        }

        // Several status changes in a burst (running, then waiting) cost one request.
        function scheduleRefresh() {
            if (refreshing || refreshTimer !== null) {
                return;
            }
            refreshTimer = window.setTimeout(function () {
                refreshTimer = null;
                refreshing = true;
                refreshPage(root, function (drawn) {
                    refreshing = false;
                    drawStatusFields(); // the fields swapped in may be older than the socket
                    if (drawn === null) {
                        refreshFailures += 1;
                        if (refreshFailures < 3) {
                            scheduleRefresh(); // a dropped request; a login page stays unswapped
                        }
                        return;
                    }
                    refreshFailures = 0;
                    drawnStatus = drawn;
                    if (drawnStatus !== status && refreshesBehind < 3) {
                        refreshesBehind += 1; // (bounded: a server behind the socket stays so)
                        scheduleRefresh(); // the run moved on while the page was fetched
                    } else {
                        refreshesBehind = 0;
                    }
                });
            }, REFRESH_DELAY_MS);
        }

        function drawTotals() {
            if (!totals) {
                return;
            }
            field("cost").textContent = money(totals.cost_usd);
            field("tokens").textContent = totals.tokens_total;
            field("llm_calls").textContent = totals.llm_call_count;
            field("tool_calls").textContent = totals.tool_call_count;
            field("steps").textContent = totals.current_step;
            const flag = field("failed_flag");
            const failed = totals.failed_tool_calls || 0;
            flag.hidden = failed === 0;
            flag.textContent = failed === 1
                ? "1 tool call failed in this run."
                : failed + " tool calls failed in this run.";
        }

        function drawSnapshot(snapshot) {
            headerSeq = snapshot.seq;
            askedCall = (snapshot.waiting && snapshot.waiting.tool_call_id) || "";
            Object.assign(parkOf, snapshot.asked);
            drawAsked(snapshot.waiting);
            totals = Object.assign({}, snapshot.totals);
            setStatus(snapshot.status);
            drawTotals();
            const waiting = field("waiting");
            waiting.replaceChildren();
            waiting.hidden = !snapshot.waiting;
            if (snapshot.waiting) {
                const w = snapshot.waiting;
                if (w.approval_id) {
                    waiting.append(el("strong", "", "Waiting for approval: "),
                        el("code", "", w.tool_name), " ");
                    const link = el("a", "live-button", "Review and decide");
                    link.href = itemUrl(approvalUrl, w.approval_id);
                    waiting.append(link);
                } else if (w.input_request && w.input_request.question) {
                    const correction = w.input_request.correction;
                    waiting.append(el("strong", "", correction ? "Waiting for help: " : "Waiting for an answer: "),
                        el("span", "", w.input_request.question));
                    const id = w.question_id || w.input_request.question_id;
                    if (id) {
                        const link = el("a", "live-button", correction ? "Help the run" : "Answer");
                        link.href = itemUrl(questionUrl, id);
                        waiting.append(" ", link);
                    }
                } else if (w.wait_until) {
                    waiting.append(el("strong", "", "Waiting until "), el("span", "", new Date(w.wait_until).toLocaleString()));
                }
            }
            const outcome = field("outcome");
            outcome.replaceChildren();
            outcome.hidden = !(snapshot.output || snapshot.error);
            if (snapshot.error) {
                outcome.append(el("strong", "", "Error: "), el("span", "", snapshot.error));
                outcome.dataset.kind = "error";
            } else if (snapshot.output) {
                outcome.append(el("strong", "", "Answer: "), el("span", "", snapshot.output));
                outcome.dataset.kind = "output";
            }
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
        function drawActions(item) {
            const links = item.querySelector(".live-step__links");
            const number = Number(item.dataset.step);
            links.replaceChildren();
            if (stepsUrl) {
                const row = el("a", "", "Step in the admin");
                row.href = stepsUrl + number;
                links.append(row);
            }
            for (const action of stepActions) {
                const applies = action.step_types.includes(item.dataset.stepType)
                    && (action.first_step || number !== 1)
                    && (!action.ended_only || TERMINAL.includes(status));
                if (applies) {
                    const link = el("a", "live-step__action", action.label);
                    link.href = action.url.replace(action.placeholder, String(number));
                    links.append(link);
                }
            }
        }

        function drawStep(event) {
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
            drawActions(item);
            return item;
        }

        // The question a parked run waits on, as asked (its act step comes with the answer).
        let asked = null;
        function drawAsked(waiting) {
            if (!waiting || !waiting.tool_call_id || !waiting.input_request || !waiting.input_request.question) {
                return;
            }
            if (asked && asked.dataset.call === waiting.tool_call_id) {
                return;
            }
            asked = el("li", "live-step live-step--act live-step--asked");
            asked.dataset.call = waiting.tool_call_id;
            const head = el("div", "live-step__head");
            head.append(el("span", "live-step__kind", "act"), el("code", "live-step__tool", waiting.tool_name),
                el("span", "live-step__preview", waiting.input_request.question),
                el("span", "live-step__meta", "asked · waiting for the answer"));
            asked.append(head);
            placeAsked();
        }

        // The "Waiting for input" line of the park a call that asked caused, once drawn (on
        // connect the snapshot comes first, then the events it follows); null for other calls.
        function parkLine(callId) {
            const seq = callId ? parkOf[callId] : undefined;
            return seq === undefined ? null : timeline.querySelector('.live-state[data-seq="' + seq + '"]');
        }

        function placeAsked() {
            const park = asked && !asked.isConnected ? parkLine(asked.dataset.call) : null;
            if (park) {
                park.parentNode.insertBefore(asked, park);
            }
        }

        // The call that asked, its step written with the answer: drawn where it asked (in the
        // place of its line as asked), the answer on the resume's line, where it came.
        function placeAnswered(item, park, step) {
            if (asked && asked.dataset.call === step.tool_call_id) {
                asked.remove();
                asked = null;
            }
            item.classList.add("live-step--asked");
            const question = step.tool_input && step.tool_input.question;
            const head = item.querySelector(".live-step__head");
            if (question && !head.querySelector(".live-step__preview")) {
                head.insertBefore(el("span", "live-step__preview", question), head.querySelector(".live-step__meta"));
            }
            park.parentNode.insertBefore(item, park);
            const resume = park.nextElementSibling;
            if (resume && resume.classList.contains("live-state")) {
                const out = step.tool_output;
                const given = step.failed ? step.error
                    : (out && typeof out === "object" && "answer" in out ? out.answer : pretty(out));
                resume.append(el("span", "live-state__answer", "Answer: " + String(given).split("\n")[0]));
            }
        }

        function drawStatus(event) {
            const data = event.data;
            const item = el("li", "live-state");
            item.dataset.seq = event.seq;
            item.append(el("span", "live-badge live-badge--small", label(data.to_status)));
            item.lastChild.dataset.status = data.to_status;
            if (data.reason) {
                const reason = window.AgentDeskStateReason(data.reason); // state_reason.js
                item.append(Object.assign(el("span", "live-state__reason", reason.text), { title: reason.title }));
            }
            return item;
        }

        function append(node) {
            field("empty").hidden = true;
            const nearBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 80;
            if (streaming && streaming.node.isConnected) {
                timeline.insertBefore(node, streaming.node);
            } else {
                timeline.append(node);
            }
            if (nearBottom) {
                node.scrollIntoView({ block: "nearest" });
            }
        }

        function onEvent(event) {
            if (event.seq <= lastSeq) {
                return; // the server sends each once; a page that reconnects asks past this
            }
            lastSeq = event.seq;
            if (event.type === "step") {
                if (streaming && event.data.step_number >= streaming.stepNumber) {
                    streaming.node.remove(); // the persisted reply replaces the streamed text
                    streaming = null;
                }
                const drawn = drawStep(event);
                const park = event.data.step_type === "act" ? parkLine(event.data.tool_call_id) : null;
                if (park) {
                    placeAnswered(drawn, park, event.data);
                } else {
                    append(drawn);
                }
                if (totals && event.seq > headerSeq) {
                    totals.cost_usd = Number(totals.cost_usd) + Number(event.data.cost_usd || 0);
                    totals.tokens_total += (event.data.tokens_input || 0) + (event.data.tokens_output || 0);
                    totals.current_step = Math.max(totals.current_step, event.data.step_number);
                    if (event.data.step_type === "think" && event.data.model) {
                        totals.llm_call_count += 1;
                    }
                    if (event.data.step_type === "act") {
                        // (an answered question's call was counted when it asked)
                        totals.tool_call_count += event.data.tool_call_id === askedCall ? 0 : 1;
                        totals.failed_tool_calls += event.data.failed ? 1 : 0;
                    }
                    drawTotals();
                }
            } else if (event.type === "status") {
                append(drawStatus(event));
            }
            placeAsked();
            if (event.seq > headerSeq) {
                // (the events replayed on connect, up to the snapshot, are past statuses: the
                // page was drawn after them and needs no refresh for them)
                setStatus(event.status);
            }
        }

        function onToken(message) {
            if (!streaming || streaming.stepNumber !== message.step_number) {
                if (streaming) {
                    streaming.node.remove();
                }
                const node = el("li", "live-step live-step--think live-step--streaming");
                const head = el("div", "live-step__head");
                head.append(el("span", "live-step__kind", "think"), el("span", "live-step__number", "#" + message.step_number),
                    el("span", "live-step__meta", "the model is writing…"));
                const body = el("p", "live-step__text");
                node.append(head, body);
                timeline.append(node);
                field("empty").hidden = true;
                streaming = { stepNumber: message.step_number, node: node, body: body };
            }
            streaming.body.textContent += message.text;
        }

        function connect() {
            const scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
            const socket = new WebSocket(scheme + window.location.host + root.dataset.socket + "?after=" + lastSeq);
            setConn("connecting", "connecting…");
            socket.addEventListener("message", function (raw) {
                let message;
                try {
                    message = JSON.parse(raw.data);
                } catch (error) {
                    return;
                }
                if (message.type === "snapshot") {
                    setConn("open", TERMINAL.includes(message.status) ? "finished" : "live");
                    backoff = BACKOFF_MIN_MS;
                    drawSnapshot(message);
                } else if (message.type === "step" || message.type === "status") {
                    onEvent(message);
                    if (TERMINAL.includes(status)) {
                        setConn("open", "finished");
                    }
                } else if (message.type === "token") {
                    onToken(message);
                }
            });
            socket.addEventListener("close", function (closed) {
                // 4401: signed out (or the key ended), 4403: no longer a member, 4404: not
                // found; 4409 (role changed) reconnects below with the new rights.
                const refused = {4401: "signed out", 4403: "no access", 4404: "not found"};
                if (refused[closed.code]) {
                    setConn("closed", refused[closed.code]);
                    return; // reconnecting would be refused again
                }
                if (streaming) {
                    streaming.node.remove(); // its step arrives with the catch-up
                    streaming = null;
                }
                setConn("closed", "reconnecting…");
                window.setTimeout(connect, backoff + Math.random() * backoff * 0.3);
                backoff = Math.min(backoff * 2, BACKOFF_MAX_MS);
            });
        }

        connect();
    }

    document.addEventListener("DOMContentLoaded", function () {
        const root = document.getElementById("live-run");
        if (root && "WebSocket" in window) {
            start(root);
        }
    });
})();
