"""The GPU benchmark of BENCH.md:  PYTHONPATH=. python3 bench/run.py --part fp16[,precision,dynamic,fp32] [filters]

Parts (any combination, run model by model in one process so that each model's timing cache is shared):
  fp16       the seed GELU case (fp32, fp16), every zoo model × batch at fp16 against the torch peers (peers.py),
             accuracy against onnxruntime fp32 at every batch, and the build cost of every model (cold and warm
             timing cache, beside torch.compile's compile time); the cold build is the batch-1 row's engine
  precision  INT8, FP8 and `best` engines beside our fp16 engine (precision_case.py)
  dynamic    a range-profile engine against static engines at min, opt and max (dynamic_case.py)
  fp32       the zoo at fp32 with TF32 on, plus an accuracy check of an engine built with TF32 off
Writes bench/results/<gpu>.json/.md (+ plots with matplotlib); fp32 zoo rows go to <gpu>-fp32.*. `--append` merges
into the files of an earlier run (rows measured now replace the same cases). A case that fails is recorded with its
error; a case whose estimated time (plan.py) no longer fits `--budget-s` is listed under "Not run". `--plan` prints
the cases with their estimated times and exits. `--device cpu` runs the same harness on the CPU (tests use it).
"""

import argparse
import json
import os
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

ALL_MODELS = ["resnet50", "mobilenet_v3_large", "efficientnet_b0", "convnext_tiny", "vit_b_16", "bert_base_seq128",
              "gpt2_seq128"]
PARTS = ("fp16", "precision", "dynamic", "fp32")
SKIPS = ("gelu", "zoo", "build", "profile", "compile")
DEFAULT_PEERS = "eager,eager+graph,compile,compile+graph,freeze+graph"


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--part", default="fp16", help=f"comma list of: {', '.join(PARTS)}")
    p.add_argument("--models", default=",".join(ALL_MODELS), help="comma-separated zoo models (or 'none')")
    p.add_argument("--batches", default="1,32", help="zoo batches (fp16 and fp32 parts)")
    p.add_argument("--dtypes", default=None, help="(older spelling) fp16 and/or fp32: the zoo parts to run")
    p.add_argument("--peers", default=DEFAULT_PEERS, help="torch peers of the zoo rows (peers.PEERS)")
    p.add_argument("--max-autotune", default="", help="model:batch[:dtype] list that also gets the "
                   "max-autotune-no-cudagraphs + freezing peer (≈ 270 s compile each), e.g. resnet50:32")
    p.add_argument("--precisions", default="int8,fp8,best", help="precision part: int8, fp8, best")
    p.add_argument("--precision-batches", default="1,32")
    p.add_argument("--precision-extra", default="resnet50:256", help="model:batch list of extra precision batches")
    p.add_argument("--best-batches", default="1", help="batches that get a `best` row")
    p.add_argument("--dynamic-models", default="resnet50,bert_base_seq128")
    p.add_argument("--real-models", default="", help="ONNX model-zoo 'light' models of the onnx package for the "
                   "build-cost table (names, or 'all'); run after the fp16 part, not with --skip=build")
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--gelu-elements", type=int, default=256 * 2**20)
    p.add_argument("--skip", default="", help=f"comma list of: {', '.join(SKIPS)}")
    p.add_argument("--quick", action="store_true", help="resnet50 and bert, fp16, 30 iterations")
    p.add_argument("--budget-s", type=float, default=540.0, help="start no case whose estimate ends after this")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--ort-threads", type=int, default=8)
    p.add_argument("--keep-caches", action="store_true", help="keep Triton's and inductor's on-disk caches (default: "
                   "a new folder per run, so cold builds and compile times are cold)")
    p.add_argument("--backend", action="store_true", help="fp16 zoo rows also time torch.compile(backend="
                   "\"tensorforge\") (runner tf-backend, beside our ONNX engine and the peers)")
    p.add_argument("--kernel-profiles", action="store_true", help="fp16 zoo rows (CUDA) also record kernel profiles of our "
                   "engine and each compiled peer (torch.profiler over 10 graph replays, after timing)")
    p.add_argument("--prewarmed", default=None, metavar="DIR", help="use the caches and exports bench/prewarm.py "
                   "filled in DIR (compiles then hit warm caches; autotuning and tactic timing still run here); the "
                   "build-cost table's cold columns come from the prewarm's own measurements")
    p.add_argument("--resume", action="store_true", help="with --append: skip every case whose row the earlier results "
                   "already hold from a run of the same --label (a run of record spread over several commands)")
    p.add_argument("--no-plots", action="store_true", help="write json and md only (plots: `python bench/report.py "
                   "FILE.json` later)")
    p.add_argument("--plan", action="store_true", help="print the cases and their estimated times, run nothing")
    p.add_argument("--out-dir", default=os.path.join(HERE, "results"))
    p.add_argument("--stem", default=None, help="results file name (default: the GPU's name)")
    p.add_argument("--label", default="", help="what was measured, e.g. the commit: recorded with every row of this "
                   "run, so that merged results say which run each row came from")
    p.add_argument("--append", action="store_true", help="merge into an existing results file of the same stem: "
                   "rows measured now replace rows of the same case, the others are kept")
    args = p.parse_args(argv)
    if args.quick:
        args.models = "resnet50,bert_base_seq128" if args.models == ",".join(ALL_MODELS) else args.models
        args.part, args.iters = "fp16", 30
    if args.dtypes is not None:
        args.part = ",".join(d for d in args.dtypes.split(",") if d)
    args.parts = [x for x in args.part.split(",") if x]
    args.models_list = [m for m in args.models.split(",") if m and m != "none"]
    args.peers_list = [x for x in args.peers.split(",") if x]
    args.skips = {s for s in args.skip.split(",") if s}
    args.batches_list = _ints(args.batches)
    args.precision_list = [x for x in args.precisions.split(",") if x]
    args.max_autotune_set = {_mat_key(x) for x in args.max_autotune.split(",") if x}
    args.extra = _model_batches(args.precision_extra)
    return args


def _ints(text: str) -> list[int]:
    return [int(b) for b in text.split(",") if b]


def _mat_key(item: str) -> tuple[str, int, str]:
    parts = item.split(":")
    if len(parts) not in (2, 3):
        raise ValueError(f"--max-autotune item {item!r} is not model:batch[:dtype]")
    return parts[0], int(parts[1]), parts[2] if len(parts) == 3 else "fp16"


def _model_batches(text: str) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for item in (x for x in text.split(",") if x):
        model, _, batch = item.partition(":")
        out.setdefault(model, []).append(int(batch))
    return out


def check_args(args) -> str | None:
    """The first problem with the selection, as a one-line message (None when fine)."""
    import peers
    import precision_case
    import zoo
    bad = [x for x in args.parts if x not in PARTS]
    if bad:
        return f"unknown --part {bad[0]!r}: use a comma list of {', '.join(PARTS)}"
    bad = [m for m in args.models_list + sorted(args.extra) if m not in zoo.ZOO]
    if bad:
        return f"unknown model {bad[0]!r}: the zoo has {', '.join(zoo.ZOO)}"
    bad = [x for x in args.peers_list if x not in peers.PEERS]
    if bad:
        return f"unknown peer {bad[0]!r}: use {', '.join(peers.PEERS)}"
    bad = [x for x in args.precision_list if x not in precision_case.PRECISIONS]
    if bad:
        return f"unknown precision {bad[0]!r}: use {', '.join(precision_case.PRECISIONS)}"
    bad = [x for x in args.skips if x not in SKIPS]
    if bad:
        return f"unknown --skip {bad[0]!r}: use {', '.join(SKIPS)}"
    return None


def _kind(precision: str) -> str:
    """The kernels a precision row compiles: int8 (int8, int8-spec, best), fp8 (fp8, fp8-spec), or fp16."""
    base = precision.removesuffix("-spec")
    return "int8" if base == "best" else base


def make_plan(args) -> list[dict]:
    """Every case this run will attempt, in order, with its estimated seconds (plan.py)."""
    import plan
    cases = []
    if "fp16" in args.parts and "gelu" not in args.skips and args.device == "cuda":
        cases.append({"kind": "gelu", "est": plan.GELU_S})
    peers = [] if "compile" in args.skips else args.peers_list
    if "compile" in args.skips:
        peers = [p for p in args.peers_list if not p.startswith(("compile", "freeze", "max-autotune"))]
    models = args.models_list if "zoo" not in args.skips else []
    # part-major: every model's fp16 rows first (the tables of record), then the slower extras; a model's timing
    # cache lives for the whole run, so its precision rows still rebuild fp16 from a warm cache
    warm = bool(args.prewarmed)
    cases += [{"kind": "export", "model": m, "est": 1.0 if warm else plan.export_s(m)} for m in models]
    if "fp16" in args.parts:
        slow = []
        for m in models:
            if "build" not in args.skips:
                cases.append({"kind": "build", "model": m, "est": plan.build_cost_s(m, warm)})
            for b in args.batches_list:
                mat = (m, b, "fp16") in args.max_autotune_set
                prebuilt = b == 1 and "build" not in args.skips
                case = {"kind": "zoo", "model": m, "batch": b, "dtype": "fp16", "max_autotune": mat,
                        "est": plan.zoo_case_s(m, b, "fp16", peers, mat, prebuilt, warm, args.backend)}
                (slow if mat and b != 1 else cases).append(case)     # max-autotune cases after the others
        cases += slow
    if args.real_models and "build" not in args.skips:      # real-model build costs: right after the fp16 part
        cases.append({"kind": "real", "est": 30.0 * len(_real_names(args))})
    if "dynamic" in args.parts:
        cases += [{"kind": "dynamic", "model": m, "est": plan.dynamic_s(m)} for m in models
                  if m in args.dynamic_models.split(",")]
    if "precision" in args.parts:
        import precision_case
        missing = {p: precision_case.unsupported(p) for p in args.precision_list if p != "fp16"}
        nothing = all(missing.values())          # no precision beyond fp16 can be built: rows say so, cost ~0
        spec_less: set[str] = set()
        for m in models:
            first = {"int8", "fp8"}              # the model's first INT8 and first FP8 builds compile their variants
            ort = not nothing                    # the model's first case also runs the onnxruntime references
            for b in args.precision_batches_for(m):
                for p in ["fp16"] + [x for x in args.precision_list if x != "fp16"]:
                    if p == "best" and b not in _ints(args.best_batches):
                        continue
                    if p.endswith("-spec") and precision_case.recorded_spec(m, p) is None:
                        spec_less.add(f"{m} {p}")      # nothing to build: no budget is set aside for it
                        continue
                    est = 0.5 if nothing else plan.precision_s(m, b, p, "fp16" in args.parts and b in args.batches_list,
                                                               first_quantized=_kind(p) in first, warm=warm)
                    first.discard(_kind(p))
                    if ort:
                        est += plan.ort_reference_s(m, "int8" in args.precision_list)
                        ort = False
                    cases.append({"kind": "precision", "model": m, "batch": b, "precision": p, "est": est})
        args.plan_notes = [f"precision {x}: no debug-precision spec recorded in bench/precision_specs.json (the "
                           "plain row's accuracy needs none, or none was searched)" for x in sorted(spec_less)]
    if "fp32" in args.parts:
        for m in models:
            for b in args.batches_list:
                mat = (m, b, "fp32") in args.max_autotune_set
                cases.append({"kind": "zoo", "model": m, "batch": b, "dtype": "fp32", "max_autotune": mat,
                              "est": plan.zoo_case_s(m, b, "fp32", peers, mat, False, warm)})
    for c in cases:
        c["peers"] = peers + (["max-autotune+graph"] if c.get("max_autotune") else [])
    return cases


def _real_names(args) -> list[str]:
    import build_cost
    have = build_cost.onnx_light_models()
    return sorted(have) if args.real_models == "all" else [n for n in args.real_models.split(",") if n]


def describe(case: dict) -> str:
    bits = [case["kind"], case.get("model", ""), f"b{case['batch']}" if "batch" in case else "",
            case.get("dtype", ""), case.get("precision", ""), "+max-autotune" if case.get("max_autotune") else ""]
    return " ".join(b for b in bits if b)


def print_plan(cases: list[dict], budget: float) -> None:
    import plan
    total = plan.OVERHEAD_S + sum(c["est"] for c in cases)
    print(f"plan: {len(cases)} cases, estimated {plan.fmt(total)} (budget {plan.fmt(budget)}; estimates from "
          "bench/plan.py, re-fit them from the elapsed_s of the rows)")
    running = plan.OVERHEAD_S
    for c in cases:
        running += c["est"]
        print(f"  {describe(c):<46} ~{plan.fmt(c['est']):>8}   (ends ~{plan.fmt(running)})"
              + ("   OVER BUDGET" if running > budget else ""))


def main(argv=None) -> int:
    try:
        args = parse(argv)
    except ValueError as e:
        print(f"bench/run.py: {e}", file=sys.stderr)
        return 2
    args.precision_batches_for = lambda m: _ints(args.precision_batches) + args.extra.get(m, [])
    if args.prewarmed and not args.plan:         # bench/prewarm.py's caches (set before torch/triton are imported)
        import prewarm
        os.environ.update(prewarm.cache_env(args.prewarmed))
    elif not args.keep_caches and not args.plan:   # cold builds and compile times: new on-disk kernel caches, set
        fresh = tempfile.mkdtemp(prefix="tf-bench-caches-")       # before torch/triton are imported
        os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(fresh, "triton"))
        os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(fresh, "inductor"))
    problem = check_args(args)
    if problem:
        print(f"bench/run.py: {problem}", file=sys.stderr)
        return 2
    cases = make_plan(args)
    print_plan(cases, args.budget_s)
    for note in getattr(args, "plan_notes", []):
        print(f"not planned: {note}")
    if args.plan:
        return 0
    import torch
    if args.device == "cuda" and not torch.cuda.is_available():
        print("bench/run.py: no CUDA GPU here; run with --device cpu (or bench/cpu.py for the CPU table)",
              file=sys.stderr)
        return 2
    return Runner(args, cases).run()


class Runner:
    """One run: the cases of `make_plan`, in order, results written after each case (a killed run keeps them)."""

    def __init__(self, args, cases):
        import torch
        import tensorforge
        from tensorforge.util import log as tflog
        tflog.set_severity(tflog.Severity.WARNING)
        if args.device == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        self.args, self.cases = args, cases
        self.t_start = time.perf_counter()
        if args.device == "cuda":
            import triton
            gpu, triton_v = torch.cuda.get_device_name(0), triton.__version__
        else:
            import platform
            gpu, triton_v = f"cpu {platform.machine()}", None
        self.stem = args.stem or "".join(c if c.isalnum() else "-" for c in gpu.lower()).strip("-")
        env = {"gpu": gpu, "torch": torch.__version__, "triton": triton_v, "tensorforge": tensorforge.__version__,
               "iters": args.iters, "warmup": args.warmup, "device": args.device,
               "args": {k: v for k, v in vars(args).items() if not callable(v) and not isinstance(v, set)}}
        env["args"]["max_autotune_set"] = sorted(":".join(map(str, k)) for k in args.max_autotune_set)
        self.res = {"environment": dict(env), "gelu": [], "zoo": [], "build_cost": None, "build_costs": [],
                    "precision": [], "dynamic": [], "skipped": []}
        self.res32 = {"environment": dict(env), "gelu": [], "zoo": [], "build_cost": None, "build_costs": [],
                      "precision": [], "dynamic": [], "skipped": []}
        self.res["skipped"] += getattr(args, "plan_notes", [])
        # --append: read the earlier results now — the partial writes after each case replace those files
        self.previous = _load(os.path.join(args.out_dir, f"{self.stem}.json")) if args.append else None
        self.previous32 = _load(os.path.join(args.out_dir, f"{self.stem}-fp32.json")) if args.append else None
        self.work = tempfile.mkdtemp(prefix="tf-bench-")
        self.prewarm = None
        if args.prewarmed:
            self._use_prewarm(args.prewarmed)

    def _use_prewarm(self, folder: str) -> None:
        """Warm compile caches, but every choice made again here: inductor's autotune cache off (its configs and
        max-autotune's kernels are re-benchmarked on this idle GPU), and our builds keep their new timing caches."""
        import torch._inductor.config as inductor_config

        import peers
        import prewarm
        inductor_config.autotune_local_cache = False
        peers.RESELECT_MAX_AUTOTUNE = True
        self.prewarm = prewarm.load_summary(folder) or {"results": {}, "note": "no prewarm.json in " + folder}
        note = {k: v for k, v in self.prewarm.items() if k != "results"}
        note["jobs_ok"] = sorted(k for k, v in self.prewarm["results"].items() if v.get("status") == "ok")
        note["jobs_not_ok"] = {k: v.get("status") for k, v in self.prewarm["results"].items()
                               if v.get("status") != "ok"}
        for res in (self.res, self.res32):
            res["environment"]["prewarm"] = note

    def log(self, msg: str) -> None:
        print(f"[{time.perf_counter() - self.t_start:7.1f}s] {msg}", flush=True)

    def fits(self, case: dict) -> bool:
        return time.perf_counter() - self.t_start + case["est"] <= self.args.budget_s

    def skip(self, res: dict, key: str, case: dict) -> None:
        res["skipped"].append(f"{key}: time budget of {self.args.budget_s:.0f} s (estimated {case['est']:.0f} s)")

    def run(self) -> int:
        exports: dict = {}
        engines: dict = {}      # model → the cold-built batch-1 fp16 engine (build cost) for its zoo row
        done = self._done_before() if self.args.resume else set()
        wanted_models = {c.get("model") for c in self.cases if c["kind"] != "export" and _case_key(c) not in done}
        for case in self.cases:
            kind = case["kind"]
            if _case_key(case) in done or (kind == "export" and case["model"] not in wanted_models):
                self.log(f"{describe(case)}: measured earlier in this run of record ({self.args.label}), kept")
                continue
            try:
                getattr(self, f"_{kind}")(case, exports, engines)
            except Exception as e:  # noqa: BLE001 - recorded, the run goes on
                traceback.print_exc()
                self._record_failure(case, e)
            release()
            self.write(plots=False)
        for res in (self.res, self.res32):
            res["environment"]["total_seconds"] = round(time.perf_counter() - self.t_start, 1)
        files = self.write(plots=not self.args.no_plots)
        self.log("wrote " + ", ".join(files))
        import report
        for res in self.outputs():
            print(report.markdown(res))
        return 0

    def _done_before(self) -> set:
        """Case keys (_case_key) of rows the --append files already hold from this --label, without an error."""
        done = set()
        for old in (self.previous, self.previous32):
            for row in _rows_of(old or {}):
                if row.get("run") == self.args.label and "error" not in row:
                    done.add(_row_key(row))
        if sum(1 for k in done if k[0] == "gelu-dtype") >= 2:
            done.add(("gelu",))
        for model in {k[1] for k in done if k[0] == "dynamic-point"}:
            if {k[2] for k in done if k[0] == "dynamic-point" and k[1] == model} >= {"min", "opt", "max"}:
                done.add(("dynamic", model))
        return done

    # ---- cases ---------------------------------------------------------------------------------
    def _gelu(self, case, exports, engines):
        import gelu_case
        import torch
        if not self.fits(case):
            return self.skip(self.res, "GELU", case)
        for dtype in (torch.float32, torch.float16):
            try:
                self.res["gelu"].append(gelu_case.run_case(self.args.gelu_elements, dtype, self.args.iters,
                                                           self.args.warmup, "compile" not in self.args.skips, self.log))
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                self.res["gelu"].append({"dtype": str(dtype), "error": _line(e)})
            release()

    def _export(self, case, exports, engines):
        import zoo
        name = case["model"]
        t0 = time.perf_counter()
        module = zoo.make(name)
        cached = None
        if self.args.prewarmed:
            import prewarm
            cached = prewarm.load_export(self.args.prewarmed, name)
        data, exporter = cached or zoo.export(name, module, os.path.join(self.work, f"{name}.onnx"))
        exports[name] = (module, data, exporter)
        self.log(f"{name}: exported with {exporter} in {time.perf_counter() - t0:.1f} s")

    def _cache(self, name: str, dtype: str) -> str:
        return os.path.join(self.work, f"timing-{name}-{dtype}.json")

    def _build(self, case, exports, engines):
        import build_cost
        import zoo
        name = case["model"]
        if name not in exports:
            return
        shape = zoo.input_shape(name, 1)
        out, engine = build_cost.run_case(exports[name][1], {"input": shape}, True, self.log, self.args.device,
                                          self._cache(name, "fp16"), label=name)
        out.update({"model": name, "batch": 1, "source": "zoo"})
        if self.prewarm is not None:
            self._prewarm_costs(name, out)
        engines[name] = engine
        self.res["build_costs"].append(out)
        if name == "resnet50":                       # the single-model entry of earlier runs (kept for readers)
            self.res["build_cost"] = out

    def _zoo(self, case, exports, engines):
        import zoo_case
        name, batch, dtype = case["model"], case["batch"], case["dtype"]
        res = self.res if dtype == "fp16" else self.res32
        if name not in exports:
            res["zoo"].append({"model": name, "batch": batch, "dtype": dtype, "error": "export failed (see log)"})
            return
        if not self.fits(case):
            return self.skip(res, f"{name} b{batch} {dtype}", case)
        module, data, exporter = exports[name]
        engine = engines.pop(name, None) if (dtype == "fp16" and batch == 1) else None
        row = zoo_case.run_case(name, module, data, dtype, batch, self.args.iters, self.args.warmup, case["peers"],
                                self._cache(name, dtype), profile="profile" not in self.args.skips
                                and batch == min(self.args.batches_list), log=self.log, device=self.args.device,
                                engine=engine, ort_threads=self.args.ort_threads,
                                backend=self.args.backend and dtype == "fp16",
                                kernel_profile=self.args.kernel_profiles and dtype == "fp16")
        row["exporter"] = exporter
        row["estimated_s"] = round(case["est"], 1)
        res["zoo"].append(row)
        if dtype == "fp16" and batch == 1:
            self._compile_times(name, row)

    def _prewarm_costs(self, name: str, out: dict) -> None:
        """Cold columns from the prewarm (kernel and timing caches cold, its jobs sharing the machine); this run's
        own build (new timing cache, kernels compiled by the prewarm) is kept as `timing_cold_s`."""
        job = self.prewarm["results"].get(f"{name}:1:fp16", {})
        out["timing_cold_s"] = out.pop("cold_s")
        out["cold_source"] = (f"prewarm: {self.prewarm.get('workers')} jobs at a time on "
                              f"{self.prewarm.get('cpu_count')} cores" + (" and one GPU" if self.args.device == "cuda"
                                                                          else ""))
        for key, src in (("cold_s", "tensorforge_build_s"), ("torch_compile_s", "compile_compile_s"),
                         ("torch_compile_freezing_s", "freeze_compile_s"), ("backend_compile_s", "backend_compile_s")):
            if isinstance(job.get(src), (int, float)):
                out[key] = job[src]
        if out.get("cold_s") and out.get("torch_compile_s"):
            out["cold_vs_torch_compile"] = round(out["cold_s"] / out["torch_compile_s"], 3)
        out["speedup"] = round(out["cold_s"] / out["warm_s"], 2) if out.get("cold_s") else None

    def _compile_times(self, name: str, row: dict) -> None:
        """torch.compile's compile time (batch 1, fp16, same run) beside the model's build cost (cold times come
        from the prewarm when the run is prewarmed: here the compiles hit its caches)."""
        if self.prewarm is not None:
            return
        for entry in self.res["build_costs"]:
            if entry.get("model") == name:
                for peer, key in (("compile", "torch_compile_s"), ("compile+graph", "torch_compile_s"),
                                  ("freeze+graph", "torch_compile_freezing_s")):
                    st = row["runners"].get(peer, {})
                    if "compile_s" in st and key not in entry:
                        entry[key] = st["compile_s"]
                if entry.get("torch_compile_s"):
                    entry["cold_vs_torch_compile"] = round(entry["cold_s"] / entry["torch_compile_s"], 3)

    def _precision(self, case, exports, engines):
        import precision_case
        name, batch, prec = case["model"], case["batch"], case["precision"]
        if prec != "fp16":
            return                                  # the model's rows run together, from its fp16 case
        if name not in exports:
            return
        todo = [c for c in self.cases if c["kind"] == "precision" and c["model"] == name and c["batch"] == batch]
        missing = {c["precision"]: precision_case.unsupported(c["precision"]) for c in todo if c["precision"] != "fp16"}
        if missing and all(missing.values()):        # nothing to compare with fp16: no fp16 build, no reference run
            self.res["precision"] += [{"model": name, "batch": batch, "precision": p, "error": f"not run: {why}"}
                                      for p, why in missing.items()]
            self.log(f"{name} b{batch}: precision rows not run: {'; '.join(sorted(set(missing.values())))}")
            return
        ests = {c["precision"]: c for c in todo}
        pending = [c["precision"] for c in todo]
        started = {}

        def budget_left():
            prec_now = pending.pop(0) if pending else None
            c = ests.get(prec_now)
            ok = c is None or self.fits(c)
            if not ok:
                self.skip(self.res, f"precision {name} b{batch} {prec_now}", c)
            started[prec_now] = ok
            return ok
        rows = precision_case.run_model(name, exports[name][1], [batch], [c["precision"] for c in todo],
                                        self.args.iters, self.args.warmup, self._cache(name, "fp16"), self.log,
                                        self.args.device, _ints(self.args.best_batches), self.args.ort_threads,
                                        budget_left)
        self.res["precision"] += [r for r in rows if r.get("error") != "not run: time budget spent"]

    def _dynamic(self, case, exports, engines):
        import dynamic_case
        import zoo
        name = case["model"]
        if name not in exports:
            return
        if not self.fits(case):
            return self.skip(self.res, f"dynamic {name} fp16", case)
        data = exports[name][1]
        if zoo.ZOO[name].family == "text":
            data, exporter = zoo.export(name, exports[name][0], dynamic_seq=True)
            self.log(f"{name}: exported with a dynamic sequence axis ({exporter})")
        self.res["dynamic"] += dynamic_case.run_model(name, data, "fp16", self.args.iters, self.args.warmup,
                                                      self._cache(name, "fp16-dynamic"), self.log, self.args.device)

    def _real(self, case, exports, engines):
        import build_cost
        have = build_cost.onnx_light_models()
        for name in _real_names(self.args):
            if name not in have:
                self.res["build_costs"].append({"model": name, "source": "onnx light", "error":
                                                f"not in this onnx package ({', '.join(have) or 'none'})"})
                continue
            if time.perf_counter() - self.t_start + 30.0 > self.args.budget_s:
                self.res["skipped"].append(f"build {name}: time budget of {self.args.budget_s:.0f} s")
                continue
            try:
                with open(have[name], "rb") as f:
                    data = f.read()
                out, _ = build_cost.run_case(data, build_cost.static_shapes(have[name]), True, self.log,
                                             self.args.device, os.path.join(self.work, f"timing-{name}.json"), name)
                out.update({"model": name, "batch": 1, "source": "onnx light"})
            except Exception as e:  # noqa: BLE001
                out = {"model": name, "source": "onnx light", "error": _line(e)}
            self.res["build_costs"].append(out)
            release()

    def _record_failure(self, case, e) -> None:
        kind, name = case["kind"], case.get("model")
        if kind == "zoo":
            res = self.res if case["dtype"] == "fp16" else self.res32
            res["zoo"].append({"model": name, "batch": case["batch"], "dtype": case["dtype"], "error": _line(e)})
        elif kind == "export":
            self.res["skipped"].append(f"{name} (all cases): export failed: {_line(e)}")
        elif kind == "build":
            self.res["build_costs"].append({"model": name, "source": "zoo", "error": _line(e)})
        elif kind == "precision":
            self.res["precision"].append({"model": name, "batch": case["batch"], "precision": case["precision"],
                                          "error": f"failed: {_line(e)}"})
        elif kind == "dynamic":
            self.res["dynamic"].append({"model": name, "dtype": "fp16", "point": "all", "error": _line(e)})
        else:
            self.res["skipped"].append(f"{kind}: failed: {_line(e)}")

    # ---- results -------------------------------------------------------------------------------
    def outputs(self) -> list[dict]:
        """The results to write: the main file always, the fp32 file when this run measured fp32 or --append keeps
        an earlier one."""
        out = [self.merged(self.res, self.previous)]
        if "fp32" in self.args.parts:
            out.append(self.merged(self.res32, self.previous32))
        return out

    def merged(self, res: dict, previous: dict | None) -> dict:
        _label_rows(res, self.args.label)
        if previous is None:
            return res
        return _merge_previous({**res, "environment": dict(res["environment"])}, previous)

    def write(self, plots: bool) -> list[str]:
        import report
        files = []
        for res, suffix in zip(self.outputs(), ("", "-fp32")):
            files += report.write(res, self.args.out_dir, self.stem + suffix, plots)
        return files


def release() -> None:
    """After a case: drop torch.compile's graphs and return the case's GPU memory before the next one."""
    from peers import reset_compiler
    reset_compiler()


def _case_key(case: dict) -> tuple:
    kind = case["kind"]
    if kind == "zoo":
        return ("zoo", case["model"], case["batch"], case["dtype"])
    if kind == "build":
        return ("build", case["model"])
    if kind == "precision":
        return ("precision", case["model"], case["batch"], case["precision"])
    if kind == "gelu":
        return ("gelu",)
    return (kind, case.get("model"))


def _row_key(row: dict) -> tuple:
    if "cold_s" in row or "warm_s" in row:
        return ("build", row.get("model"))
    if "precision" in row:
        return ("precision", row.get("model"), row.get("batch"), row.get("precision"))
    if "point" in row:
        return ("dynamic-point", row.get("model"), row.get("point"))
    if "elements" in row:
        return ("gelu-dtype", row.get("dtype"))
    return ("zoo", row.get("model"), row.get("batch"), row.get("dtype"))


def _line(e: BaseException) -> str:
    return f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:300]}"


def _load(path: str) -> dict | None:
    import json
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def _rows_of(res: dict) -> list[dict]:
    return (res.get("zoo", []) + res.get("gelu", []) + res.get("precision", []) + res.get("dynamic", [])
            + res.get("build_costs", []) + ([res["build_cost"]] if isinstance(res.get("build_cost"), dict) else []))


def _label_rows(res: dict, label: str) -> None:
    """Record `label` (--label) on every row this run measured."""
    res["environment"]["label"] = label
    for row in _rows_of(res):
        row.setdefault("run", label)


KEYS = {  # section → the case a row measures (a newer row of the same case replaces the older one)
    "zoo": lambda r: (r.get("model"), r.get("batch"), r.get("dtype")),
    "precision": lambda r: (r.get("model"), r.get("batch"), r.get("precision")),
    "dynamic": lambda r: (r.get("model"), r.get("dtype"), r.get("point")),
    "build_costs": lambda r: (r.get("model"),),
}
SKIP_PREFIX = {  # section → the "Not run" entry of a case (what a row of that case makes obsolete)
    "zoo": lambda k: f"{k[0]} b{k[1]} {k[2]}:",
    "precision": lambda k: f"precision {k[0]} b{k[1]} {k[2]}:",
    "dynamic": lambda k: f"dynamic {k[0]} {k[1]}:",
    "build_costs": lambda k: f"build {k[0]}:",
}


def _merge_previous(res: dict, old: dict) -> dict:
    """Rows of an earlier run (same stem) for the cases this run did not measure."""
    rank = {m: i for i, m in enumerate(ALL_MODELS)}
    order = {"zoo": lambda r: (r.get("dtype", ""), rank.get(r.get("model"), len(rank)), r.get("batch", 0)),
             "precision": lambda r: (rank.get(r.get("model"), len(rank)), r.get("batch", 0),
                                     ["fp16", "int8", "fp8", "best"].index(r["precision"])
                                     if r.get("precision") in ("fp16", "int8", "fp8", "best") else 9),
             "dynamic": lambda r: (rank.get(r.get("model"), len(rank)), ["min", "opt", "max", "all"].index(r["point"])
                                   if r.get("point") in ("min", "opt", "max", "all") else 9),
             "build_costs": lambda r: (r.get("source") != "zoo", rank.get(r.get("model"), len(rank)))}
    obsolete: list[str] = []
    for section, key in KEYS.items():
        done = {key(r) for r in res.get(section, [])}
        rows = [r for r in old.get(section, []) if key(r) not in done] + res.get(section, [])
        res[section] = sorted(rows, key=order[section])
        obsolete += [SKIP_PREFIX[section](key(r)) for r in res[section] if "error" not in r]
    have = {g.get("dtype") for g in res["gelu"]}
    res["gelu"] = [g for g in old.get("gelu", []) if g.get("dtype") not in have] + res["gelu"]
    res["build_cost"] = res.get("build_cost") or old.get("build_cost")
    models_with_rows = {r.get("model") for r in res["zoo"] if "error" not in r}
    kept = [s for s in old.get("skipped", []) + res["skipped"]
            if not any(s.startswith(p) for p in obsolete)
            and not any(s.startswith(f"{m} (all cases):") for m in models_with_rows)]
    last = {s.split(":", 1)[0]: s for s in kept}         # a case skipped by several runs: its latest reason, once
    res["skipped"] = list(last.values())
    res["environment"]["earlier_runs"] = _earlier_runs(old["environment"])
    return res


def _earlier_runs(env: dict) -> list[dict]:
    """The runs behind a results file, oldest first, as one flat list: its own earlier runs, then itself without
    that list (nested, each --append copied the whole history again: 2.5 MB after a dozen appends), each once."""
    out, seen = [], set()
    for e in env.get("earlier_runs", []) + [env]:
        flat = {k: v for k, v in e.items() if k != "earlier_runs"}
        text = json.dumps(flat, sort_keys=True, default=str)
        if text not in seen:
            seen.add(text)
            out.append(flat)
    return out


if __name__ == "__main__":
    sys.exit(main())
