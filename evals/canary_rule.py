"""A canary's rules (README "Canary versions"): which arm a run goes to, and when the candidate
is worse than stable beyond the canary's threshold with enough runs to tell, or may be promoted.
Pure functions of the figures (evals/canary_figures.py), so the rule is tested exactly as
documented.

**Routing.** A run goes to the candidate when ``sha256("<canary id>:<key>")``, its first eight
bytes read as an unsigned integer, modulo 10,000, is below ``share`` x 100. The key is the
conversation the run continues (its trigger's ``session_id``, else ``contact_id``, else the
person who started it: memory.conversations), else the run's own id: one customer sees one
version for the whole canary; another canary of the agent draws again.

**Rollback**, evaluated when a run of either arm ends, only once each arm has at least
``min_runs`` ended runs (``n_s``, ``n_c``):

- failure rate (runs ended ``failed`` or ``timed_out`` over ended runs, ``p_s``, ``p_c``): a
  one-sided two-proportion z-test with the pooled rate ``p``:
  ``z = (p_c - p_s) / sqrt(p (1 - p) (1/n_c + 1/n_s))``; rolled back when ``z >= 1.645``
  (alpha 0.05) **and** ``p_c - p_s >= threshold``.
- cost per run or steps per run (means ``m_s``, ``m_c`` and sample variances ``v_s``, ``v_c``
  over ended runs): Welch's statistic ``t = (m_c - m_s) / sqrt(v_c/n_c + v_s/n_s)``; rolled back
  when ``t >= 1.645`` (the normal quantile for alpha 0.05: lenient below about 30 runs per arm)
  **and** ``m_c > m_s x (1 + threshold)``. With no variance at all in either arm, the margin
  alone decides.

**Promotion by rule**: once the candidate has ``promote_after`` ended runs and the rollback
rule does not hold.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any

Z_ALPHA = 1.645  # one-sided, alpha = 0.05
BUCKETS = 10_000


def bucket(canary_id: object, key: str) -> int:
    """The key's bucket in 0..9999 for this canary (stable across processes and restarts)."""
    digest = hashlib.sha256(f"{canary_id}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % BUCKETS


def on_candidate(canary_id: object, key: str, share: int) -> bool:
    return bucket(canary_id, key) < share * (BUCKETS // 100)


@dataclass(frozen=True, slots=True)
class Arm:
    """One arm's ended runs and what the rule reads of them."""

    ended: int = 0
    failed: int = 0
    cost_mean: float = 0.0
    cost_var: float = 0.0
    steps_mean: float = 0.0
    steps_var: float = 0.0

    @property
    def failure_rate(self) -> float:
        return self.failed / self.ended if self.ended else 0.0

    @classmethod
    def of(cls, figures: dict[str, Any]) -> Arm:
        return cls(
            ended=int(figures.get("ended", 0)),
            failed=int(figures.get("failed", 0)),
            cost_mean=float(figures.get("cost_per_run") or 0),
            cost_var=float(figures.get("cost_var") or 0),
            steps_mean=float(figures.get("steps") or 0),
            steps_var=float(figures.get("steps_var") or 0),
        )


@dataclass(frozen=True, slots=True)
class Verdict:
    worse: bool
    statistic: float | None  # z or t; None while an arm has too few runs
    reason: str


def failure_rate_test(stable: Arm, candidate: Arm, threshold: float) -> Verdict:
    n_s, n_c = stable.ended, candidate.ended
    p_s, p_c = stable.failure_rate, candidate.failure_rate
    pooled = (stable.failed + candidate.failed) / (n_s + n_c)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n_c + 1 / n_s))
    z = (p_c - p_s) / se if se > 0 else 0.0
    worse = z >= Z_ALPHA and p_c - p_s >= threshold
    return Verdict(
        worse,
        z,
        f"failure rate {p_c:.0%} on the candidate against {p_s:.0%} on stable "
        f"({n_c} and {n_s} runs; z = {z:.2f}, rolled back at z >= {Z_ALPHA} "
        f"and a difference of at least {threshold:.0%})",
    )


def mean_test(
    name: str, stable: tuple[float, float, int], candidate: tuple[float, float, int], margin: float
) -> Verdict:
    (m_s, v_s, n_s), (m_c, v_c, n_c) = stable, candidate
    above = m_c > m_s * (1 + margin)
    se = math.sqrt(v_c / n_c + v_s / n_s)
    t = (m_c - m_s) / se if se > 0 else (math.inf if above else 0.0)
    worse = above and t >= Z_ALPHA
    shown = "inf" if math.isinf(t) else f"{t:.2f}"
    return Verdict(
        worse,
        t,
        f"{name} {m_c:.4g} on the candidate against {m_s:.4g} on stable ({n_c} and {n_s} "
        f"runs; Welch t = {shown}, rolled back at t >= {Z_ALPHA} and more than "
        f"{margin:.0%} above stable)",
    )


def rollback_verdict(
    metric: str, stable: Arm, candidate: Arm, *, threshold: float, min_runs: int
) -> Verdict:
    """Whether the candidate is worse than stable on ``metric`` (a CanaryMetric value)."""
    if stable.ended < min_runs or candidate.ended < min_runs:
        return Verdict(
            False,
            None,
            f"waiting for {min_runs} ended runs on each arm "
            f"({candidate.ended} on the candidate, {stable.ended} on stable)",
        )
    if metric == "failure_rate":
        return failure_rate_test(stable, candidate, threshold)
    if metric == "cost_per_run":
        return mean_test(
            "cost per run",
            (stable.cost_mean, stable.cost_var, stable.ended),
            (candidate.cost_mean, candidate.cost_var, candidate.ended),
            threshold,
        )
    return mean_test(
        "steps per run",
        (stable.steps_mean, stable.steps_var, stable.ended),
        (candidate.steps_mean, candidate.steps_var, candidate.ended),
        threshold,
    )


def promotable(candidate: Arm, promote_after: int | None, verdict: Verdict) -> bool:
    return promote_after is not None and candidate.ended >= promote_after and not verdict.worse
