"""``pip install ./clients/python`` as a user types it: pip builds the package (setuptools from the
configured package index, in an isolated build environment) and it imports from where it was
installed, outside this checkout, with nothing but the standard library."""

from __future__ import annotations

import os
import subprocess
import sys

PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _index_env():
    """Uses the machine's configured indexes as the only ones (as the repository's CI does), so
    pip never waits on an index it cannot reach."""
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    out = subprocess.run([sys.executable, "-m", "pip", "config", "get", "global.extra-index-url"], capture_output=True, text=True)
    urls = out.stdout.split()
    if out.returncode == 0 and urls:
        env["PIP_INDEX_URL"] = urls[0]
        env["PIP_EXTRA_INDEX_URL"] = " ".join(urls[1:])
    return env


def test_pip_installs_the_package(tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), PACKAGE], check=True, env=_index_env(), cwd=str(tmp_path), timeout=600)
    probe = "import polar_trainer, polar_trainer.slime.rollout, polar_trainer.scheduler; print(polar_trainer.__file__, polar_trainer.__version__)"
    out = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(target)!r}); {probe}"], check=True, capture_output=True, text=True, cwd=str(tmp_path))
    path, version = out.stdout.split()
    assert path.startswith(str(target)) and version == "0.1.0"
    # Installed metadata: no dependencies.
    dist = [d for d in os.listdir(target) if d.endswith(".dist-info")]
    assert len(dist) == 1 and "Requires-Dist" not in (target / dist[0] / "METADATA").read_text().split("Provides-Extra")[0]
