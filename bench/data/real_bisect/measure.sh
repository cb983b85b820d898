# One measurement of the checkout: one `perfdash run` of its model; prints the named columns of its performance CSV,
# one a line, in the order named (PERFDASH_MEASURE_COLUMN, comma-separated; default abs_latency: the compiled
# latency in ms). perfdash bisect reads the last line. PERFDASH_MEASURE_REPEAT: timed iterations (default 20).
# In a duet (perfdash bisect --duet) PERFBISECT_CPUS names this side's half: as many threads as it has CPUs.
set -e
out=$(mktemp -d)
threads=""
if [ -n "${PERFBISECT_CPUS:-}" ]; then threads="--threads $(echo "$PERFBISECT_CPUS" | tr ',' '\n' | wc -l)"; fi
"${PERFDASH_PYTHON:-python}" -m perfdash.cli run --suite torchbench --models-file models.toml --performance \
    --repeat "${PERFDASH_MEASURE_REPEAT:-20}" --warmup 3 $threads --output-dir "$out" --no-progress > "$out/log" 2>&1 || { tail -5 "$out/log"; exit 1; }
"${PERFDASH_PYTHON:-python}" -c "import csv,sys; r=next(csv.DictReader(open(sys.argv[1])));
print('\n'.join(r[c] for c in sys.argv[2].split(',')))" \
    "$out/inductor_torchbench_float32_inference_cpu_performance.csv" "${PERFDASH_MEASURE_COLUMN:-abs_latency}"
rm -rf "$out"
