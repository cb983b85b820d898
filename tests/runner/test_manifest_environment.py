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


def test_the_vector_isa_is_the_widest_the_cpu_flags_name(tmp_path) -> None:
    from runner.manifest import cpu_vector_isa

    cases = {"fpu sse2 avx avx2 fma": "AVX2", "avx2 avx512f avx512bw avx512_vnni": "AVX-512",
             "avx2 avx512f amx_bf16 amx_tile amx_int8": "AMX", "fpu sse2": "unknown"}
    for flags, expected in cases.items():
        info = tmp_path / "cpuinfo"
        info.write_text(f"processor\t: 0\nmodel name\t: Some CPU\nflags\t\t: {flags}\n\n")
        assert cpu_vector_isa(info) == expected
    assert cpu_vector_isa(tmp_path / "missing") == "unknown"
