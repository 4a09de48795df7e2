/* The approvers' inbox, live (approvals/templates/approvals/inbox/list.html).
 *
 * Follows the agency's websocket that live/notifications.js opens on every admin page (one socket
 * per page): each of its messages arrives as the document's "agentdesk:agency-message" event
 * (docs/live-protocol.md). When a run goes to or from waiting_approval / waiting_input, or the
 * deciders are notified of a new item, it fires one "inbox-update" event on <body>, at most every
 * 500 ms: the list is an htmx fragment triggered by it (and every 60 s, the fallback when the
 * socket is down). After a reconnect, and when the tab comes back to the front, the list reloads
 * once for what was missed. The sidebar's Inbox badge is notifications.js's to keep current.
 * The "live" mark turns on with the socket's first "ready"; without one in 10 s it says that the
 * list is polled. The page works without this script (a reload shows the same list). */
(function () {
    "use strict";

    const DEBOUNCE_MS = 500;
    const READY_WAIT_MS = 10000;
    const WAITING = ["waiting_approval", "waiting_input"];
    const LIST_HEADER = "X-Inbox-List";

    function concernsWaiting(message) {
        if (message.type === "notification") {
            return message.kind === "approval" || message.kind === "question";
        }
        if (message.type !== "status") {
            return false;
        }
        const data = message.data || {};
        return WAITING.indexOf(data.from_status) >= 0 || WAITING.indexOf(data.to_status) >= 0 ||
            WAITING.indexOf(message.status) >= 0;
    }

    function start(root) {
        const list = document.getElementById("inbox-list");
        const state = root.querySelector("[data-live-state]");
        let timer = null;
        let opened = false;

        function setState(value) {
            if (state) {
                state.dataset.liveState = value;
            }
        }

        function refresh() {
            if (timer !== null) {
                return;
            }
            timer = window.setTimeout(function () {
                timer = null;
                document.body.dispatchEvent(new CustomEvent("inbox-update", { bubbles: true }));
            }, DEBOUNCE_MS);
        }

        document.addEventListener("agentdesk:agency-message", function (event) {
            const message = event.detail;
            if (!message || typeof message !== "object") {
                return;
            }
            if (message.type === "ready") {
                setState("open");
                if (opened) {
                    refresh(); // back after a drop: catch up on what was missed
                }
                opened = true;
            } else if (concernsWaiting(message)) {
                refresh();
            }
        });

        // notifications.js announces no failure (a browser without websockets, a refused or
        // unreachable socket): no "ready" in time means the list is only polled.
        if (!("WebSocket" in window)) {
            setState("closed");
        } else {
            setState("connecting");
            window.setTimeout(function () {
                if (!opened) {
                    setState("closed");
                }
            }, READY_WAIT_MS);
        }

        document.addEventListener("visibilitychange", function () {
            if (document.visibilityState === "visible") {
                refresh();
            }
        });

        // The actions ticked for "Approve selected" stay ticked when the list is swapped in
        // again (those still waiting): a live update does not undo a selection.
        let ticked = [];
        document.body.addEventListener("htmx:afterSwap", function (event) {
            if (!list || event.detail.target !== list) {
                return;
            }
            list.querySelectorAll("input[data-pick]").forEach(function (box) {
                box.checked = ticked.indexOf(box.value) >= 0;
            });
        });

        // An answer that is not the list (the login page, once the session has ended) is not
        // swapped in: the page reloads, and the admin asks to log in again.
        document.body.addEventListener("htmx:beforeSwap", function (event) {
            if (!list || event.detail.target !== list) {
                return;
            }
            ticked = Array.from(list.querySelectorAll("input[data-pick]:checked"), function (box) {
                return box.value;
            });
            const xhr = event.detail.xhr;
            if (xhr.getResponseHeader(LIST_HEADER) === null) {
                event.detail.shouldSwap = false;
                if (xhr.status === 200) {
                    window.location.reload();
                }
            }
        });
    }

    function startOnInbox() {
        const root = document.getElementById("inbox");
        if (root) {
            start(root);
        }
    }

    // Deferred, this runs before notifications.js opens its socket (on DOMContentLoaded): no
    // "ready" is missed, so the first one is never taken for a reconnect's.
    if (document.readyState === "loading") {
        document.addEventListener("DOMContentLoaded", startOnInbox);
    } else {
        startOnInbox();
    }
})();
