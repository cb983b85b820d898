"""The manifest's software environment (what detection compares night to night to name an environment change)."""

from __future__ import annotations

import platform

from runner.manifest import software_environment


def test_environment_names_kernel_and_the_allocator_settings_set(monkeypatch) -> None:
    monkeypatch.setenv("LD_PRELOAD", "/usr/lib/libjemalloc.so.2")
    monkeypatch.delenv("MALLOC_CONF", raising=False)
    env = software_environment()
    assert env["kernel"] == platform.release()
    assert env["LD_PRELOAD"] == "/usr/lib/libjemalloc.so.2" and "MALLOC_CONF" not in env
    assert all(isinstance(v, str) and v for v in env.values())


def test_environment_is_the_workers_not_the_runners(monkeypatch) -> None:
    # docker/xeon-launch.sh preloads into the runner too; the manifest names what the workers started with.
    monkeypatch.setenv("MALLOC_CONF", "from-the-launcher")
    env = software_environment({"LD_PRELOAD": "/lib/x86_64-linux-gnu/libjemalloc.so.2", "MALLOC_CONF": "dirty:-1",
                                "KMP_BLOCKTIME": "1", "UNRELATED": "x"})
    assert env["LD_PRELOAD"] == "/lib/x86_64-linux-gnu/libjemalloc.so.2" and env["MALLOC_CONF"] == "dirty:-1"
    assert env["KMP_BLOCKTIME"] == "1" and "UNRELATED" not in env
