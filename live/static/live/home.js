/* The staff home's live updates (templates/admin/index.html, live/views.py).
 *
 * Opens the agency's websocket (/ws/agency/, same origin, the admin session authenticates it) and,
 * when a run's status changes, fires one "live-update" event on <body>, at most every 500 ms: the
 * panels are htmx fragments triggered by it (and every 30 s, the fallback when the socket is down).
 * Reconnects with exponential backoff and jitter; after a reconnect the panels reload once, for
 * what changed while the socket was down.
 *
 * Draws the usage charts (live/home/_charts.html) with Chart.js (unfold serves it), at load and
 * each time their panel is swapped in: unfold's own chart component is drawn once, at load. An
 * empty chart's y axis runs from 0 to a small round number, cost ticks read in dollars. */
(function () {
    "use strict";

    const DEBOUNCE_MS = 500;
    const BACKOFF_MIN_MS = 1000;
    const BACKOFF_MAX_MS = 30000;
    // The y axis of a chart with nothing in it: 0 to this, not Chart.js's -1 to 1.
    const EMPTY_MAX = { usd: 0.01, count: 10 };
    const MUTED = "#9ca3af";

    function cssColor(value) {
        const match = /^var\((.*)\)$/.exec(value || "");
        return match ? getComputedStyle(document.documentElement).getPropertyValue(match[1]).trim() : value;
    }

    function tick(format, value) {
        if (format === "usd") {
            return "$" + Number(value).toLocaleString("en-US", { maximumSignificantDigits: 3 });
        }
        return Number(value).toLocaleString("en-US", { notation: "compact" });
    }

    function drawChart(canvas) {
        const Chart = window.Chart;
        if (!Chart || !canvas.dataset.value) {
            return;
        }
        const previous = Chart.getChart(canvas);
        if (previous) {
            previous.destroy();
        }
        const data = JSON.parse(canvas.dataset.value);
        const format = canvas.dataset.format || "count";
        for (const dataset of data.datasets) {
            dataset.backgroundColor = cssColor(dataset.backgroundColor);
            dataset.borderColor = cssColor(dataset.borderColor);
        }
        const empty = data.datasets.every((dataset) => dataset.data.every((value) => !Number(value)));
        const dark = document.documentElement.classList.contains("dark");
        const grid = cssColor(dark ? "var(--color-base-700)" : "var(--color-base-300)");
        new Chart(canvas, {
            type: canvas.dataset.homeChart || "bar",
            data: data,
            options: {
                animation: false,
                responsive: true,
                maintainAspectRatio: false,
                datasets: {
                    bar: { borderRadius: 12, maxBarThickness: 4, barPercentage: 1 },
                    line: { borderWidth: 2, pointStyle: false },
                },
                plugins: {
                    legend: { display: false },
                    tooltip: {
                        callbacks: {
                            label: (item) => item.dataset.label + ": " + (format === "usd"
                                ? "$" + item.parsed.y : item.parsed.y.toLocaleString("en-US")),
                        },
                    },
                },
                scales: {
                    x: {
                        border: { dash: [5, 5], width: 0 },
                        grid: { color: grid, tickWidth: 0 },
                        ticks: { color: MUTED, maxTicksLimit: 7 },
                    },
                    y: {
                        beginAtZero: true,
                        suggestedMax: empty ? EMPTY_MAX[format] : undefined,
                        border: { dash: [5, 5], width: 0 },
                        grid: {
                            color: grid,
                            tickWidth: 0,
                            lineWidth: (context) => (context.tick && context.tick.value === 0 ? 1 : 0),
                        },
                        ticks: {
                            color: MUTED,
                            maxTicksLimit: 6,
                            precision: format === "count" ? 0 : undefined,
                            callback: (value) => tick(format, value),
                        },
                    },
                },
            },
        });
    }

    function drawCharts(scope) {
        scope.querySelectorAll("canvas[data-home-chart]").forEach(drawChart);
    }

    function watchSwaps(root) {
        // A panel's answer that is not a panel (the login page, once the session has ended) is
        // not swapped in: the page reloads, and the admin asks to log in again.
        document.body.addEventListener("htmx:beforeSwap", function (event) {
            const xhr = event.detail.xhr;
            if (root.contains(event.detail.target) && !xhr.getResponseHeader("X-Home-Panel")) {
                event.detail.shouldSwap = false;
                if (xhr.status === 200) {
                    window.location.reload();
                }
            } else if (root.contains(event.detail.target)) {
                // Charts about to be replaced let go of their canvas (and resize observer).
                event.detail.target.querySelectorAll("canvas[data-home-chart]").forEach(function (canvas) {
                    const chart = window.Chart && window.Chart.getChart(canvas);
                    if (chart) {
                        chart.destroy();
                    }
                });
            }
        });
        document.body.addEventListener("htmx:afterSwap", function (event) {
            if (root.contains(event.detail.target)) {
                drawCharts(event.detail.target);
            }
        });
    }

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
                // 4401/4403/4404: not allowed (logged out, removed, agency gone): polling only.
                if (event.code === 4401 || event.code === 4403 || event.code === 4404) {
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

        connect();
    }

    document.addEventListener("DOMContentLoaded", function () {
        const root = document.getElementById("staff-home");
        if (root) {
            drawCharts(root);
            watchSwaps(root);
            start(root);
        }
    });
})();
