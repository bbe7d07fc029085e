"""summary.py - the closing table of `make bench`: ctrain next to every PyTorch
timed in the same run, per model (training samples/s of the bench protocol,
achieved GFLOP/s, the fraction of ctrain's FP32 FMA peak and of its sgemm peak,
and ctrain's speed over each PyTorch), with the CPU, ctrain's BLAS core and each
PyTorch's build named. Reads the JSON files bench/run.sh wrote
(RESULTS/HOST-MODEL-cpu.json and the PyTorch runs written after it,
RESULTS/HOST-MODEL-torch-VERSION-cpu.json) and writes the table as JSON too.

    /usr/bin/python3 bench/summary.py RESULTS_DIR HOST SUMMARY.json
"""
import glob
import json
import os
import sys

MODELS = [("siamese-lstm", "pairs/s"), ("cnn", "images/s"), ("siamese-cnn", "pairs/s")]


def load(path):
    with open(path) as f:
        return json.load(f)


def main():
    results, host, out = sys.argv[1:4]
    summary = {"host": None, "models": []}
    for model, unit in MODELS:
        mine_path = os.path.join(results, f"{host}-{model}-cpu.json")
        if not os.path.exists(mine_path):
            continue
        mine = load(mine_path)
        t0 = os.path.getmtime(mine_path)
        peers = [load(p) for p in sorted(glob.glob(os.path.join(results, f"{host}-{model}-torch-*-cpu.json")))
                 if os.path.getmtime(p) >= t0]
        peers.sort(key=lambda d: [int(x) if x.isdigit() else 0 for x in d["pytorch"]["version"].split("+")[0].split(".")]
                   if "pytorch" in d else [0])
        if summary["host"] is None:
            h = mine["host"]
            summary["host"] = {"cpu": h.get("cpu"), "cpu_features": h.get("cpu_features"), "logical_cores": h.get("logical_cores"),
                               "ctrain_blas": h.get("blas"), "ctrain_blas_core": h.get("blas_core"),
                               "ctrain_kernels": h.get("kernels"), "threads": mine["threads"],
                               "fma_peak_gflops": mine.get("fma_peak_gflops"), "sgemm_peak_gflops": mine.get("peak_gflops"),
                               "pytorch": [d.get("pytorch", {"version": d["framework"]}) for d in peers]}
            print(f"CPU: {h.get('cpu')}, {h.get('logical_cores')} logical cores ({h.get('cpu_features', '')}); "
                  f"{mine['threads']} threads")
            print(f"ctrain: own kernels {h.get('kernels', 'AVX-512 where the CPU has it')}; "
                  f"BLAS core {h.get('blas_core', h.get('blas'))}; FP32 FMA peak "
                  f"{mine.get('fma_peak_gflops') or 0:.1f} GFLOP/s, sgemm peak {mine.get('peak_gflops') or 0:.1f} GFLOP/s "
                  f"(measured in the {model} run; each model's fractions use its own run's peaks)")
            for d in peers:
                p = d.get("pytorch", {})
                print(f"PyTorch {p.get('version', d['framework'])}: {d['host'].get('blas_core', d['host'].get('blas'))} "
                      f"({p.get('python', '')})")
            print()
            print(f"{'model':<14} {'':<18} {'samples/s':>10} {'GFLOP/s':>8} {'of FMA peak':>12} {'of sgemm':>9} {'ctrain is':>10}")
        fma, sg = mine.get("fma_peak_gflops") or 0, mine.get("peak_gflops") or 0
        rows = []
        for name, d in [("ctrain", mine)] + [("PyTorch " + d.get("pytorch", {}).get("version", d["framework"]).split("+")[0], d)
                                             for d in peers]:
            sps, gf = d["train_samples_per_s"], d["gflops"]
            ratio = mine["train_samples_per_s"] / sps if d is not mine else None
            rows.append({"name": name, "samples_per_s": sps, "gflops": gf,
                         "fraction_of_fma_peak": gf / fma if fma else None, "fraction_of_sgemm_peak": gf / sg if sg else None,
                         "ctrain_speedup": ratio})
            print(f"{model if d is mine else '':<14} {name:<18} {sps:>10.0f} {gf:>8.1f} "
                  f"{(f'{100 * gf / fma:.0f}%' if fma else 'n/a'):>12} {(f'{100 * gf / sg:.0f}%' if sg else 'n/a'):>9} "
                  f"{(f'{ratio:.2f}x' if ratio else ''):>10}")
        summary["models"].append({"model": model, "unit": unit, "rows": rows})
    if summary["host"] is None:
        print("no ctrain run found in " + results)
        return 1
    with open(out, "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    print(f"\n(samples/s: {', '.join(m + ' ' + u for m, u in MODELS)}; ctrain is: ctrain's samples/s over that row's)")
    print(f"summary written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
