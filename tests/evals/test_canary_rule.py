"""The canary's rules, exactly as the README states them (evals/canary_rule.py): the routing
hash's share and stability, the failure-rate z-test, the cost and steps test, promotion."""

from __future__ import annotations

import math
import uuid

from evals.canary_rule import Arm, on_candidate, promotable, rollback_verdict

CANARY = uuid.UUID("6f1c3c52-8d0e-4c55-9a3c-0e9f1b2a7d10")
KEYS = [f"entity:{uuid.UUID(int=n)}" for n in range(2000)]


def test_the_hash_gives_each_share_within_two_points_over_2000_keys() -> None:
    # Tolerance: 2 points of 2,000 keys is 40 runs, about 3 standard deviations at 10 %
    # (sqrt(2000 x 0.1 x 0.9) = 13.4) and 1.8 at 50 %.
    for share in (10, 25, 50):
        chosen = sum(on_candidate(CANARY, key, share) for key in KEYS)
        assert abs(chosen / len(KEYS) - share / 100) <= 0.02, (share, chosen)


def test_a_key_always_gets_the_same_arm_and_another_canary_draws_again() -> None:
    first = [on_candidate(CANARY, key, 50) for key in KEYS[:200]]
    assert first == [on_candidate(CANARY, key, 50) for key in KEYS[:200]]
    other = [on_candidate(uuid.UUID(int=7), key, 50) for key in KEYS[:200]]
    assert first != other
    # A larger share keeps every key it had (the buckets below 10 % are below 20 % too).
    assert all(on_candidate(CANARY, k, 20) for k in KEYS if on_candidate(CANARY, k, 10))


def test_failure_rate_rolls_back_only_past_z_and_the_threshold_with_enough_runs() -> None:
    stable = Arm(ended=20, failed=1)
    worse = Arm(ended=20, failed=8)  # 40 % against 5 %: z = 2.65
    verdict = rollback_verdict("failure_rate", stable, worse, threshold=0.05, min_runs=20)
    assert verdict.worse
    assert verdict.statistic is not None
    pooled = 9 / 40
    assert math.isclose(
        verdict.statistic, 0.35 / math.sqrt(pooled * (1 - pooled) * (2 / 20)), rel_tol=1e-9
    )
    assert "z = 2.65" in verdict.reason
    # Too few runs on one arm: no decision, whatever the rates.
    assert not rollback_verdict(
        "failure_rate", Arm(ended=19, failed=0), worse, threshold=0.05, min_runs=20
    ).worse
    # A difference the test cannot tell from chance (10 % against 5 %: z = 0.6).
    assert not rollback_verdict(
        "failure_rate", stable, Arm(ended=20, failed=2), threshold=0.05, min_runs=20
    ).worse
    # Significant but under the threshold: 40 % against 5 % with a 50-point threshold.
    assert not rollback_verdict("failure_rate", stable, worse, threshold=0.5, min_runs=20).worse
    # Better than stable: never.
    assert not rollback_verdict("failure_rate", worse, stable, threshold=0.0, min_runs=20).worse


def test_cost_and_steps_roll_back_on_welch_and_the_margin() -> None:
    stable = Arm(ended=30, cost_mean=0.010, cost_var=0.000004, steps_mean=4, steps_var=1)
    dearer = Arm(ended=30, cost_mean=0.016, cost_var=0.000009, steps_mean=4.2, steps_var=1)
    verdict = rollback_verdict("cost_per_run", stable, dearer, threshold=0.25, min_runs=20)
    t = 0.006 / math.sqrt(0.000009 / 30 + 0.000004 / 30)
    assert verdict.worse
    assert verdict.statistic is not None
    assert math.isclose(verdict.statistic, t)
    # 60 % dearer but the margin asks for more than 100 %.
    assert not rollback_verdict("cost_per_run", stable, dearer, threshold=1.0, min_runs=20).worse
    # 5 % more steps: under a 25 % margin.
    assert not rollback_verdict("steps", stable, dearer, threshold=0.25, min_runs=20).worse
    # No variance at all: the margin alone decides.
    flat = Arm(ended=20, steps_mean=3)
    assert rollback_verdict(
        "steps", flat, Arm(ended=20, steps_mean=5), threshold=0.25, min_runs=20
    ).worse


def test_promotion_by_rule_needs_the_candidate_runs_and_no_rollback() -> None:
    stable, good = Arm(ended=3), Arm(ended=5)
    waiting = rollback_verdict("failure_rate", stable, good, threshold=0.05, min_runs=20)
    assert promotable(good, 5, waiting)
    assert not promotable(good, 6, waiting)
    assert not promotable(good, None, waiting)
    bad = Arm(ended=20, failed=20)
    verdict = rollback_verdict("failure_rate", Arm(ended=20), bad, threshold=0.05, min_runs=20)
    assert verdict.worse
    assert not promotable(bad, 5, verdict)
