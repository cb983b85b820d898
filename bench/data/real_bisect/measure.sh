# One measurement of the checkout: one `perfdash run` of its model; prints the compiled latency (ms) of the CSV.
set -e
out=$(mktemp -d)
"${PERFDASH_PYTHON:-python}" -m perfdash.cli run --suite torchbench --models-file models.toml --performance \
    --repeat 20 --warmup 3 --output-dir "$out" --no-progress > "$out/log" 2>&1 || { tail -5 "$out/log"; exit 1; }
"${PERFDASH_PYTHON:-python}" -c "import csv,sys; r=next(csv.DictReader(open(sys.argv[1]))); print(r['abs_latency'])" \
    "$out/inductor_torchbench_float32_inference_cpu_performance.csv"
rm -rf "$out"
