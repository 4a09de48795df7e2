/* The live view of one execution (live/templates/live/execution_live.html).
 *
 * Connects to /ws/executions/<id>/ (same origin: the admin session authenticates it), draws the
 * snapshot into the header and each step and state change into the timeline, and grows the text
 * of the model call under way from "token" messages. Reconnects with backoff and asks only for
 * what it missed (?after=<last event number>), so nothing is drawn twice. Protocol:
 * docs/live-protocol.md.
 *
 * The rest of the page (the title, the Run fields, the diagrams, the Steps / Tool calls / State
 * transitions tables, the Cancel button) is the server's, as of the page's load: when the run's
 * status moves on from the one it was drawn with, the page is fetched again (one request, never a
 * reload) and those parts are swapped in, so the page agrees with the header. Below the width
 * where the admin hides a table's header row, the run's tables stack: each cell is labelled
 * with its column. */
(function () {
    "use strict";

    const BACKOFF_MIN_MS = 500;
    const BACKOFF_MAX_MS = 15000;
    const REFRESH_DELAY_MS = 300;
    const TERMINAL = ["completed", "failed", "cancelled", "timed_out"];
    const STATUS_LABELS = {
        pending: "Pending", running: "Running", waiting_approval: "Waiting for approval",
        waiting_input: "Waiting for input", completed: "Completed", failed: "Failed",
        cancelled: "Cancelled", timed_out: "Timed out",
    };

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

    function money(value) {
        const number = Number(value || 0);
        return "$" + (number < 0.01 && number > 0 ? number.toFixed(6) : number.toFixed(4));
    }

    function itemUrl(template, id) {
        return template.replace(/[0-]{8}-[0-]{4}-[0-]{4}-[0-]{4}-[0-]{12}/, encodeURIComponent(id));
    }

    function time(iso) {
        return iso ? new Date(iso).toLocaleTimeString() : "";
    }

    // Each cell of the run's inline tables gets its column's name, shown beside it when the table
    // stacks on a narrow screen (live.css): the admin hides the header row there.
    function labelCells(scope) {
        for (const table of scope.querySelectorAll("table.formset")) {
            const names = Array.from(table.querySelectorAll("thead th"), (th) => th.textContent.trim());
            for (const row of table.querySelectorAll("tr.form-row")) {
                Array.from(row.children).forEach(function (cell, index) {
                    if (names[index]) {
                        cell.dataset.label = names[index];
                    }
                });
            }
        }
    }

    // The header's action list (Cancel run, Replay, History): the <ul> holding the History link.
    function toolList(doc) {
        const history = doc.querySelector('#header-inner a[href$="/history/"]');
        return history ? history.closest("ul") : null;
    }

    /* Re-fetches the page and swaps in its server-rendered parts; ``onDone(status)`` gets the
     * status they were drawn with (null when the answer was not the page, e.g. a login form). */
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
                const tools = toolList(document);
                const freshTools = toolList(doc);
                if (tools && freshTools) {
                    tools.innerHTML = freshTools.innerHTML;
                }
                const title = document.querySelector("#header-inner h1");
                const freshTitle = doc.querySelector("#header-inner h1");
                if (title && freshTitle) {
                    title.innerHTML = freshTitle.innerHTML;
                }
                document.title = doc.title;
                labelCells(form);
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
        let lastSeq = 0; // the last event drawn: a reconnect asks for what follows it
        let headerSeq = -1; // the snapshot's number: step costs after it are added to its totals
        let askedCall = ""; // the call waiting for a person's answer: the totals count it already
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

        function setStatus(value) {
            status = value;
            const badge = field("status");
            badge.dataset.status = value;
            badge.textContent = STATUS_LABELS[value] || value;
            if (TERMINAL.includes(value)) {
                // Until the refresh swaps the header's actions: an ended run cannot be cancelled.
                document.querySelectorAll("[data-run-tool=cancel]").forEach((node) => node.remove());
            }
            if (value !== drawnStatus) {
                scheduleRefresh();
            }
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

        function drawStep(event) {
            const step = event.data;
            const item = el("li", "live-step live-step--" + step.step_type + (step.failed ? " live-step--failed" : ""));
            item.dataset.seq = event.seq;
            const head = el("div", "live-step__head");
            head.append(el("span", "live-step__kind", step.step_type));
            head.append(el("span", "live-step__number", "#" + step.step_number));
            if (step.tool_name) {
                head.append(el("code", "live-step__tool", step.tool_name));
            }
            if (step.failed) {
                head.append(el("span", "live-step__failed", "failed"));
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
            item.append(head);
            if (step.text) {
                item.append(el("p", "live-step__text", step.text));
            }
            if (step.step_type === "act") {
                item.append(block("Arguments", step.tool_input));
                if (step.failed) {
                    item.append(block("Error", step.error || step.tool_output, "error"));
                } else if (step.tool_output !== null && step.tool_output !== undefined) {
                    item.append(block("Result", step.tool_output));
                }
            }
            return item;
        }

        function drawStatus(event) {
            const data = event.data;
            const item = el("li", "live-state");
            item.dataset.seq = event.seq;
            item.append(el("span", "live-badge live-badge--small", STATUS_LABELS[data.to_status] || data.to_status));
            item.lastChild.dataset.status = data.to_status;
            if (data.reason) {
                item.append(el("span", "live-state__reason", data.reason));
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
                append(drawStep(event));
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
        const form = root && document.getElementById(root.dataset.form);
        if (form) {
            labelCells(form);
        }
        if (root && "WebSocket" in window) {
            start(root);
        }
    });
})();
