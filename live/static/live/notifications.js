/* Notifications on every admin page (UNFOLD["SCRIPTS"] in config/settings/base.py).
 *
 * Opens the agency's websocket (/ws/agency/, the admin session authenticates it) on the pages of a
 * member of an agency (those whose sidebar has the Inbox link) and:
 * - shows each {"type": "notification"} message as a toast for a few seconds (an approval or a
 *   question waiting, with a link to it; or what an agent's notify_user tool sent);
 * - keeps the Inbox badge's count current: reloaded (debounced) when a run starts or stops
 *   waiting for a person, and after a reconnect.
 * Every message is also fired as the document's "agentdesk:agency-message" event (detail: the
 * message), for pages that follow the agency, so that a page opens one socket. A page that names
 * its socket (data-live-socket, e.g. a superuser's inbox: /ws/agency/?agency=<id>) gets that one.
 * Text from agents is untrusted: it is only ever set with textContent. */
(function () {
    "use strict";

    const TOAST_MS = 8000;
    const MAX_TOASTS = 4;
    const DEBOUNCE_MS = 400;
    const BACKOFF_MIN_MS = 1000;
    const BACKOFF_MAX_MS = 30000;
    const WAITING = ["waiting_approval", "waiting_input"];
    const BADGE_CLASSES = "sidebar-badge font-semibold h-[18px] leading-[18px] ms-2 px-1 relative " +
        "rounded-xs text-center text-[11px] whitespace-nowrap uppercase min-w-[18px] bg-red-100 " +
        "text-red-700 dark:bg-red-500/20 dark:text-red-400";

    function inboxLink() {
        return document.querySelector("a[href='/approvals/']");
    }

    function toasts() {
        let box = document.getElementById("agentdesk-toasts");
        if (!box) {
            box = document.createElement("div");
            box.id = "agentdesk-toasts";
            box.className = "agentdesk-toasts";
            box.setAttribute("role", "status");
            box.setAttribute("aria-live", "polite");
            document.body.append(box);
        }
        return box;
    }

    function showToast(message) {
        const box = toasts();
        const toast = document.createElement("div");
        toast.className = "agentdesk-toast agentdesk-toast--" + (message.level || "info");
        const text = document.createElement("span");
        text.className = "agentdesk-toast__text";
        text.textContent = String(message.message || "");
        toast.append(text);
        const url = typeof message.url === "string" ? message.url : "";
        if (url.startsWith("/") && !url.startsWith("//")) { // same origin only
            const link = document.createElement("a");
            link.className = "agentdesk-toast__link";
            link.href = url;
            link.textContent = message.kind === "question" ? "Answer" : "Decide";
            toast.append(link);
        }
        const close = document.createElement("button");
        close.type = "button";
        close.className = "agentdesk-toast__close";
        close.setAttribute("aria-label", "Dismiss");
        close.textContent = "×";
        close.addEventListener("click", function () { toast.remove(); });
        toast.append(close);
        box.append(toast);
        while (box.children.length > MAX_TOASTS) {
            box.firstElementChild.remove();
        }
        window.setTimeout(function () { toast.remove(); }, TOAST_MS);
    }

    function setBadge(count) {
        const link = inboxLink();
        if (!link) {
            return;
        }
        let badge = link.querySelector(".sidebar-badge");
        if (count <= 0) {
            if (badge) {
                badge.remove();
            }
            return;
        }
        if (!badge) {
            badge = document.createElement("span");
            badge.className = BADGE_CLASSES;
            link.append(badge);
        }
        badge.textContent = String(count);
    }

    let countTimer = null;
    function reloadCount() {
        if (countTimer !== null) {
            return;
        }
        countTimer = window.setTimeout(function () {
            countTimer = null;
            fetch("/live/waiting-count/", { credentials: "same-origin", headers: { Accept: "application/json" } })
                .then(function (response) { return response.ok ? response.json() : null; })
                .then(function (body) {
                    if (body && typeof body.count === "number") {
                        setBadge(body.count);
                        document.dispatchEvent(new CustomEvent("agentdesk:waiting-count", { detail: body.count }));
                    }
                })
                .catch(function () { /* the next change tries again */ });
        }, DEBOUNCE_MS);
    }

    // A superuser belongs to no agency: the plain path is refused (4404), the page names it.
    function socketPath() {
        const page = document.querySelector("[data-live-socket]");
        const path = page ? page.dataset.liveSocket : "";
        return path && path.startsWith("/ws/agency/") ? path : "/ws/agency/";
    }

    function start() {
        if (!inboxLink() || !("WebSocket" in window)) {
            return; // not an agency member's admin page (the login page, a superuser's)
        }
        let backoff = BACKOFF_MIN_MS;
        let opened = false;

        function connect() {
            const scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
            const socket = new WebSocket(scheme + window.location.host + socketPath());
            socket.addEventListener("message", function (event) {
                let message;
                try {
                    message = JSON.parse(event.data);
                } catch (error) {
                    return;
                }
                // Pages that follow the agency (the inbox) listen to this socket instead of
                // opening their own: every message, as the document's event.
                document.dispatchEvent(new CustomEvent("agentdesk:agency-message", { detail: message }));
                if (message.type === "ready") {
                    backoff = BACKOFF_MIN_MS;
                    if (opened) {
                        reloadCount(); // back after a drop: what changed meanwhile
                    }
                    opened = true;
                } else if (message.type === "notification") {
                    showToast(message);
                    reloadCount();
                } else if (message.type === "status" && message.data &&
                           (WAITING.includes(message.data.from_status) || WAITING.includes(message.data.to_status))) {
                    reloadCount();
                }
            });
            socket.addEventListener("close", function (event) {
                if (event.code === 4401 || event.code === 4404 || event.code === 4403) {
                    return; // logged out, or no agency: retrying cannot help
                }
                const delay = backoff + Math.random() * backoff / 2;
                backoff = Math.min(backoff * 2, BACKOFF_MAX_MS);
                window.setTimeout(connect, delay);
            });
        }
        connect();
    }

    if (document.readyState === "loading") {
        document.addEventListener("DOMContentLoaded", start);
    } else {
        start();
    }
})();
