#!/usr/bin/env bash
# Runs a command with the CPU settings of PyTorch's CPU dashboard (torch.backends.xeon.run_cpu):
#   xeon-launch single -- CMD...   one physical core, one thread
#   xeon-launch socket -- CMD...   every physical core of socket 0, one thread per core, memory bound to node 0
#   xeon-launch --count CONFIG     prints the thread count of CONFIG (for `perfdash run --threads`)
# jemalloc and Intel's OpenMP are preloaded; KMP_* pin OpenMP threads compactly and keep them from spinning long.
# With --print it prints the environment and command instead of running them (the tests use it).
set -euo pipefail

action=run
case "${1:-}" in
    --print) action=print; shift ;;
    --count) action=count; shift ;;
esac
config="${1:?usage: xeon-launch [--print|--count] single|socket [-- CMD...]}"
shift
[ "${1:-}" = -- ] && shift

# First logical CPU of each physical core of socket 0: hyperthread siblings stay idle, as the dashboard runs them.
mapfile -t cores < <(lscpu -b -p=CPU,Core,Socket | awk -F, '!/^#/ && $3 == 0 && !seen[$2]++ {print $1}')
[ ${#cores[@]} -gt 0 ] || { echo "xeon-launch: lscpu shows no core on socket 0" >&2; exit 2; }
case "$config" in
    single) cpus=("${cores[0]}") ;;
    socket) cpus=("${cores[@]}") ;;
    *) echo "xeon-launch: unknown thread config '$config' (single or socket)" >&2; exit 2 ;;
esac
cpu_list="$(IFS=,; echo "${cpus[*]}")"
if [ "$action" = count ]; then echo "${#cpus[@]}"; exit 0; fi
[ $# -gt 0 ] || { echo "xeon-launch: no command given" >&2; exit 2; }

preload=()
for lib in "${JEMALLOC_LIB:-/usr/lib/x86_64-linux-gnu/libjemalloc.so.2}" "${IOMP_LIB:-/usr/local/lib/libiomp5.so}"; do
    if [ -e "$lib" ]; then preload+=("$lib"); else echo "xeon-launch: warning: $lib missing, not preloaded" >&2; fi
done

export OMP_NUM_THREADS="${#cpus[@]}"
export KMP_AFFINITY="granularity=fine,compact,1,0"
export KMP_BLOCKTIME=1
export MALLOC_CONF="oversize_threshold:1,background_thread:true,metadata_thp:auto,dirty_decay_ms:-1,muzzy_decay_ms:-1"
export PERFDASH_THREAD_CONFIG="$config"
export PERFDASH_CPU_LIST="$cpu_list"
if [ ${#preload[@]} -gt 0 ]; then
    LD_PRELOAD="$(IFS=:; echo "${preload[*]}")${LD_PRELOAD:+:$LD_PRELOAD}"
    export LD_PRELOAD
fi

if command -v numactl >/dev/null 2>&1; then
    launcher=(numactl "--physcpubind=$cpu_list" --membind=0)
else
    launcher=(taskset -c "$cpu_list")
fi

if [ "$action" = print ]; then
    env | grep -E '^(OMP_NUM_THREADS|KMP_AFFINITY|KMP_BLOCKTIME|MALLOC_CONF|LD_PRELOAD|PERFDASH_[A-Z_]+)=' | sort
    echo "command: ${launcher[*]} $*"
    exit 0
fi
exec "${launcher[@]}" "$@"
