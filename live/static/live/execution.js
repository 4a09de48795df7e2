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

    const parts = window.AgentDeskRunParts; // run_parts.js
    const { TERMINAL, pageData, el, pretty, money, itemUrl, time, refreshPage } = parts;

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
        // What a step drawn by run_parts.js needs of this view.
        const run = { stepsUrl, stepActions, status: () => status };

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
                timeline.querySelectorAll(".live-step[data-step]").forEach((item) => parts.drawActions(item, run));
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
                const drawn = parts.drawStep(event, run);
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
