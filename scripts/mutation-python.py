"""Hand-made mutants of the Python scheduler's acceptance and advantages (clients/python).

mutmut is not on this machine's package indexes, so this is the fallback the mutation-testing
doc (docs/testing.md, "Mutation testing") describes: each mutant below is one textual change to
a copy of clients/python (never the working tree), and the tests that should catch it are run
against the copy. A mutant whose tests still pass SURVIVED: a missing test, or an equivalent
change (the doc says which).

    python3 scripts/mutation-python.py            # all mutants, one table line each
    python3 scripts/mutation-python.py grpo-eps   # the ones whose name contains the word
    python3 scripts/mutation-python.py --check    # only that every mutant still applies (scripts/mutation.test.ts)
"""
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "clients" / "python"
ADV = "src/polar_trainer/advantages.py"
GRP = "src/polar_trainer/groups.py"
TESTS = ["tests/test_groups_advantages.py", "tests/test_admission.py", "tests/test_scheduler_state.py"]

# (name, file, original text, mutated text): each original must occur exactly once.
MUTANTS = [
    ("traj-kind", ADV, 'if o.kind == "trainable" and kept:', 'if kept:'),
    ("traj-mean", ADV, "sum(s.reward for s in kept) / len(kept)", "sum(s.reward for s in kept)"),
    ("std-bessel", ADV, "/ (len(values) - 1))", "/ len(values))"),
    ("std-one", ADV, "if len(values) < 2:", "if len(values) < 1:"),
    ("grpo-equal", ADV, "    if max(means) - min(means) <= _EQUAL_EPS:\n        return {\"mean\": mu, \"std\": 0.0}\n    for", "    for"),
    ("grpo-eps", ADV, "(s.reward - mu) / (sd + eps) if normalize_std", "(s.reward - mu) / sd if normalize_std"),
    ("grpo-nostd", ADV, "if normalize_std else s.reward - mu", "if normalize_std else s.reward"),
    ("reset-skip", ADV, "    _reset(group)\n    trajs = _trajectories(group)\n    means = [m for _, _, m in trajs]\n    if not means:\n        return {\"mean\": 0.0, \"std\": 0.0}\n    mu = sum(means) / len(means)\n    sd = _std(means)\n    if max(", "    trajs = _trajectories(group)\n    means = [m for _, _, m in trajs]\n    if not means:\n        return {\"mean\": 0.0, \"std\": 0.0}\n    mu = sum(means) / len(means)\n    sd = _std(means)\n    if max("),
    ("loo-baseline", ADV, "baseline = (total - m) / others if others else 0.0", "baseline = total / len(means)"),
    ("loo-single", ADV, "if others else 0.0", "if others else m"),
    ("loo-equal", ADV, "if normalize_std and max(means)", "if max(means)"),
    ("apply-none", ADV, 'if estimator == "none":', 'if estimator == "None":'),
    ("judge-required", GRP, "if len(trainable) < cfg.required_usable:", "if len(trainable) < cfg.required_usable - 1:"),
    ("judge-problems", GRP, "        if o.problems:\n            return Verdict(False, \"rejected\", o.problems[0])", "        if False:\n            return Verdict(False, \"rejected\", o.problems[0])"),
    ("judge-tokens", GRP, "== 0:\n        return Verdict(False, \"rejected\", \"no_trainable_tokens\")", "< 0:\n        return Verdict(False, \"rejected\", \"no_trainable_tokens\")"),
    ("judge-all-wrong", GRP, 'if cfg.drop_all_wrong_groups and klass == "all_wrong":', 'if klass == "all_wrong":'),
    ("judge-all-equal", GRP, "max(rewards) - min(rewards) <= _EQUAL_EPS:", "max(rewards) - min(rewards) < _EQUAL_EPS:"),
    ("judge-balance", GRP, "tally.all_correct >= tally.mixed:", "tally.all_correct > tally.mixed:"),
    ("judge-tally", GRP, "        tally.mixed += 1", "        pass"),
    ("required-ceil", GRP, "max(1, math.ceil(self.group_size * self.min_complete_fraction - 1e-9))", "max(1, int(self.group_size * self.min_complete_fraction))"),
    ("klass-threshold", GRP, "correct = [r >= correct_threshold for r in rewards]", "correct = [r > correct_threshold for r in rewards]"),
    ("version-removed", GRP, "for s in samples if not s.removed)", "for s in samples)"),
    # Added after the first run: the kinds of bug the 22 above left out.
    ("required-min1", GRP, "return max(1, math.ceil(self.group_size * self.min_complete_fraction - 1e-9))", "return math.ceil(self.group_size * self.min_complete_fraction - 1e-9)"),
    ("required-float", GRP, "return max(1, math.ceil(self.group_size * self.min_complete_fraction - 1e-9))", "return max(1, math.ceil(self.group_size * self.min_complete_fraction))"),
    ("version-newest", GRP, "return min(known) if known else stamp", "return max(known) if known else stamp"),
    ("grpo-mean-samples", ADV, "    mu = sum(means) / len(means)\n    sd = _std(means)\n    if max(", "    mu = sum(s.reward for _, kept, _ in trajs for s in kept) / sum(len(kept) for _, kept, _ in trajs)\n    sd = _std(means)\n    if max("),
    ("grpo-std-samples", ADV, "    sd = _std(means)\n    if max(", "    sd = _std([s.reward for _, kept, _ in trajs for s in kept])\n    if max("),
    ("grpo-traj-reward", ADV, "    for _, kept, _ in trajs:\n        for s in kept:\n            s.advantage = (s.reward - mu) / (sd + eps) if normalize_std else s.reward - mu", "    for _, kept, m in trajs:\n        for s in kept:\n            s.advantage = (m - mu) / (sd + eps) if normalize_std else m - mu"),
    ("loo-nostd", ADV, "s.advantage = diff / (sd + eps) if normalize_std else diff", "s.advantage = diff"),
    ("loo-reset-skip", ADV, "    _reset(group)\n    trajs = _trajectories(group)\n    means = [m for _, _, m in trajs]\n    if not means:\n        return {\"mean\": 0.0, \"std\": 0.0}\n    mu = sum(means) / len(means)\n    sd = _std(means)\n    if normalize_std", "    trajs = _trajectories(group)\n    means = [m for _, _, m in trajs]\n    if not means:\n        return {\"mean\": 0.0, \"std\": 0.0}\n    mu = sum(means) / len(means)\n    sd = _std(means)\n    if normalize_std"),
    ("apply-normalize", ADV, "return ESTIMATORS[estimator](group, normalize_std)", "return ESTIMATORS[estimator](group)"),
]


def run(name, rel, old, new, tests):
    with tempfile.TemporaryDirectory(prefix="polar-pymut-") as tmp:
        copy = Path(tmp) / "python"
        shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("build", "__pycache__", "*.egg-info"))
        path = copy / rel
        text = path.read_text()
        if text.count(old) != 1:
            return "stale", 0.0, f"{rel}: original text found {text.count(old)} times"
        path.write_text(text.replace(old, new))
        t = time.time()
        r = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
            cwd=copy, env={**__import__("os").environ, "PYTHONPATH": str(copy / "src")},
            capture_output=True, text=True,
        )
        status = "killed" if r.returncode == 1 else "survived" if r.returncode == 0 else f"error {r.returncode}"
        return status, time.time() - t, r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr[-200:]


def check():
    stale = [f"{name}: {rel}" for name, rel, old, _ in MUTANTS if (ROOT / rel).read_text().count(old) != 1]
    for line in stale:
        print(f"stale mutant (its original text is not in the source exactly once): {line}")
    print(f"{len(MUTANTS) - len(stale)} of {len(MUTANTS)} mutants apply")
    return 1 if stale else 0


def main():
    if sys.argv[1:] == ["--check"]:
        return check()
    words = sys.argv[1:]
    chosen = [m for m in MUTANTS if not words or any(w in m[0] for w in words)]
    killed = 0
    for name, rel, old, new in chosen:
        status, secs, last = run(name, rel, old, new, TESTS)
        killed += status == "killed"
        print(f"{name:18} {rel:34} {status:9} {secs:5.1f}s  {last}", flush=True)
    print(f"{killed} of {len(chosen)} killed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
