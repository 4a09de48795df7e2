/* The staff home's live updates (templates/admin/index.html, live/views.py).
 *
 * Opens the agency's websocket (/ws/agency/, same origin, the admin session authenticates it) and,
 * when a run's status changes, fires one "live-update" event on <body>, at most every 500 ms: the
 * panels are htmx fragments triggered by it (and every 30 s, the fallback when the socket is down).
 * Reconnects with exponential backoff and jitter; after a reconnect the panels reload once, for
 * what changed while the socket was down. */
(function () {
    "use strict";

    const DEBOUNCE_MS = 500;
    const BACKOFF_MIN_MS = 1000;
    const BACKOFF_MAX_MS = 30000;

    function start(root) {
        const path = root.dataset.liveSocket;
        if (!path || !("WebSocket" in window)) {
            return;
        }
        const badge = root.querySelector("[data-live-state]");
        let backoff = BACKOFF_MIN_MS;
        let timer = null;
        let opened = false;

        function setState(state) {
            if (badge) {
                badge.dataset.liveState = state;
            }
        }

        function refresh() {
            if (timer !== null) {
                return;
            }
            timer = window.setTimeout(function () {
                timer = null;
                document.body.dispatchEvent(new CustomEvent("live-update", { bubbles: true }));
            }, DEBOUNCE_MS);
        }

        function connect() {
            const scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
            const socket = new WebSocket(scheme + window.location.host + path);
            setState("connecting");
            socket.addEventListener("message", function (event) {
                let message;
                try {
                    message = JSON.parse(event.data);
                } catch (error) {
                    return;
                }
                if (message.type === "ready") {
                    setState("open");
                    backoff = BACKOFF_MIN_MS;
                    if (opened) {
                        refresh(); // back after a drop: catch up on what was missed
                    }
                    opened = true;
                } else if (message.type === "status") {
                    refresh();
                }
            });
            socket.addEventListener("close", function (event) {
                setState("closed");
                // 4401/4404: not allowed (logged out, agency gone): polling only.
                if (event.code === 4401 || event.code === 4404) {
                    return;
                }
                const wait = backoff / 2 + Math.random() * (backoff / 2);
                backoff = Math.min(backoff * 2, BACKOFF_MAX_MS);
                window.setTimeout(connect, wait);
            });
        }

        // A tab brought back to the front may have slept through updates.
        document.addEventListener("visibilitychange", function () {
            if (document.visibilityState === "visible") {
                refresh();
            }
        });

        // A panel's answer that is not a panel (the login page, once the session has ended) is
        // not swapped in: the page reloads, and the admin asks to log in again.
        document.body.addEventListener("htmx:beforeSwap", function (event) {
            const xhr = event.detail.xhr;
            if (root.contains(event.detail.target) && !xhr.getResponseHeader("X-Home-Panel")) {
                event.detail.shouldSwap = false;
                if (xhr.status === 200) {
                    window.location.reload();
                }
            }
        });

        connect();
    }

    document.addEventListener("DOMContentLoaded", function () {
        const root = document.getElementById("staff-home");
        if (root) {
            start(root);
        }
    });
})();
