#!/bin/bash
# The runs of record on the H200, as device commands of < 10 minutes each (bench/README.md "Runs of record").
#   bash bench/h200_session.sh RECORD "<label>" fp16[,fp32]
#        the zoo tables (fp16 rows with the tf-backend runner and kernel profiles; fp32 rows with the TF32-off check),
#        the GELU case and the build costs. Resumable: bench/prewarm.py first compiles the cases' kernels and graphs
#        in parallel into $PREWARM (jobs an earlier command finished there are kept while the machine stays warm),
#        then run.py --append --resume measures, one case at a time, every case the results in bench/results/ do
#        not hold yet from a run of the same label. Repeat the command until "Not run" is empty.
#        MODELS=a,b and EXTRA="<run.py switches>" narrow a RECORD command (a named subset, say so in the note).
#   bash bench/h200_session.sh ZOO_PRECISION "<label>"
#        issue 12's table: fp16, INT8, FP8, their debug-precision spec rows (precision_specs.json) and best (batch
#        1) for every zoo model at batch 1 and 32, resnet50 also
#        at 256, with kernel profiles; resumable like RECORD (--append --resume: repeat with SEED_DIR=<the previous
#        command's json> until "Not run" is empty; about 4 commands). MODELS=, PRECISIONS= and BATCHES= narrow it.
#   bash bench/h200_session.sh VERIFY "<label>"
#        the GPU checks of a session's kernel and fusion changes in one command: the tests that need a GPU (pytest
#        -k "(cuda or hopper) and not sm90"), the quantized-kernel smoke (every INT8/FP8 tactic bit-exact on GPU shapes; batch-1 split-K
#        beside one-pass, CUDA-graph timed), the conv smoke (depthwise, 1×1, gated 1×1 and SE-MLP kernels against cuDNN / the GEMM pair), the split-K GEMM smoke (fp16, batch-1 projections), then INT8 and
#        best rows at batch 1 for bert-base, resnet50 and mobilenet_v3_large beside their fp16 engines (MODELS=
#        narrows it; BATCHES=1,32 adds INT8 rows at 32;
#        PRECISIONS=int8 drops the best rows; SKIP_SMOKE=1 leaves the smokes out, SKIP_QUANT_SMOKE=1 the quantized one).
#   bash bench/h200_session.sh PRECISION "<label>" [S]
#        precision rows (BERT INT8 b32; resnet50 INT8 and the INT8 spec b32), the dynamic-shape rows, and the GPU
#        smokes (control flow, trees, INT8 layers, build time, contrib ops) into one file, within S seconds.
# Each step gets the seconds left of the allowance as its --budget-s, so the command ends in time whatever the
# estimates' error; what does not fit is listed under "Not run". Writes json + md (no plots: at most 8 files come
# back from the device; `python bench/report.py` draws them here) under $OUT.
set -u
export PYTHONPATH=.
LABEL="$2"
LIMIT=${LIMIT:-570}
PREWARM=${PREWARM:-/tmp/tf-prewarm}
left() { echo $(( LIMIT - SECONDS )); }
bench() { python3 bench/run.py "$@" --out-dir "$OUT" --label "$LABEL" --no-plots --append --budget-s "$(( $(left) - 15 ))"
          echo "bench rc=$?"; }
smoke() { local name=$1 t=$2; [ "$t" -gt 5 ] && [ "$(left)" -ge "$t" ] || { echo "smoke $name: no time left" >> "$OUT/smokes.txt"; return; }
          echo "=== smoke $name (limit $t s)" >> "$OUT/smokes.txt"
          timeout "$t" python3 "bench/gpu_smoke/$name.py" >> "$OUT/smokes.txt" 2>&1; echo "smoke $name rc=$?" | tee -a "$OUT/smokes.txt"; }
cp bench/results/nvidia-h200.json bench/results/nvidia-h200-fp32.json "$OUT/" 2>/dev/null
# SEED_DIR=<folder carried with the checkout>: results of the previous command (its $OUT files) to resume from, in
# place of the checkout's; without it a second command re-measures what the first already did (and another card's
# file, e.g. nvidia-h100-80gb-hbm3.json, is not resumed at all)
if [ -n "${SEED_DIR:-}" ]; then cp "$SEED_DIR"/*.json "$OUT/" || { echo "SEED_DIR=$SEED_DIR holds no results" >&2; exit 2; }; fi
ASKED_MODELS=${MODELS:-}  # VERIFY's own default applies only when MODELS= is not given
MODELS=${MODELS:-resnet50,mobilenet_v3_large,efficientnet_b0,convnext_tiny,vit_b_16,bert_base_seq128,gpt2_seq128}
EXTRA=${EXTRA:-}          # more run.py switches for RECORD, e.g. EXTRA="--skip gelu,build --peers compile+graph"
case "$1" in
  RECORD)
    DTYPES=${3:-fp16}
    python3 bench/prewarm.py --cache-dir "$PREWARM" --models "$MODELS" --batches 1,32 --dtypes "$DTYPES" \
            --workers 14 --budget-s "$(( $(left) > 420 ? 230 : $(left) / 2 ))"
    cp "$PREWARM/prewarm.json" "$OUT/prewarm.json"
    # shellcheck disable=SC2086
    bench --part "$DTYPES" --models "$MODELS" --prewarmed "$PREWARM" --backend --kernel-profiles --resume $EXTRA
    ;;
  ZOO_PRECISION)
    # the models' fp16/INT8/FP8 builds at batch 1 compile in parallel first (the variants serve every batch);
    # jobs an earlier command finished in $PREWARM are kept while the machine stays warm
    python3 bench/prewarm.py --cache-dir "$PREWARM" --models "$MODELS" --batches 1 --dtypes fp16,int8,fp8 \
            --peers "" --workers 8 --budget-s "$(( $(left) > 420 ? 200 : $(left) / 3 ))"
    bench --part precision --models "$MODELS" --precisions "${PRECISIONS:-int8,int8-spec,fp8,fp8-spec,best}" \
          --precision-batches "${BATCHES:-1,32}" --precision-extra "resnet50:256" --kernel-profiles --resume \
          --prewarmed "$PREWARM"
    ;;
  VERIFY)
    : > "$OUT/smokes.txt"
    if [ -n "${CEILING:-}" ]; then   # CEILING=1: BERT's GEMMs: bare one-tile/persistent loops, the engine's kernel
      # (both store paths); CEILING=fp16 adds the Triton forms on fp16 operands
      timeout 90 python3 bench/gpu_smoke/int8_ceiling.py --int8-only --fused --bert-only --budget-s 60 \
              $([ "$CEILING" = fp16 ] && echo --fp16) \
              > "$OUT/ceiling.txt" 2>&1
      echo "ceiling rc=$?" | tee -a "$OUT/smokes.txt"
    fi
    echo "=== pytest -k '(cuda or hopper) and not sm90'" >> "$OUT/smokes.txt"
    # the tests that need a GPU, one line each (a timeout still shows how far they got). Left out: tests/serve
    # (tritonclient and ray are not on the device), the ONNX backend suite's 2033 *_cuda cases (a CUDA build each)
    # and the *_sm90 compile tests, which need no GPU and run in CI: with them the 150 s ran out after 19-23 tests
    timeout 150 python3 -m pytest -v --tb=short -p no:cacheprovider tests -k "(cuda or hopper) and not sm90" \
            --ignore=tests/serve --ignore=tests/onnx_backend >> "$OUT/smokes.txt" 2>&1
    echo "pytest rc=$?" | tee -a "$OUT/smokes.txt"
    [ -n "${SKIP_SMOKE:-}${SKIP_QUANT_SMOKE:-}" ] || smoke quant_kernels 120   # SKIP_SMOKE=1: rows after the tests
    [ -n "${SKIP_SMOKE:-}" ] || smoke depthwise 200          # depthwise (+ rows configs explored), 1×1, gated, SE MLP vs old
    [ -n "${SKIP_SMOKE:-}" ] || smoke splitk 70              # split-K GEMM vs cuBLAS and one-pass at batch-1 projections
    bench --part precision --models "${ASKED_MODELS:-bert_base_seq128,resnet50,mobilenet_v3_large}" --precisions "${PRECISIONS:-int8,best}" \
          --precision-batches "${BATCHES:-1}" --precision-extra "" --kernel-profiles
    ;;
  PRECISION)
    LIMIT=${3:-570}
    : > "$OUT/smokes.txt"
    bench --part precision --models bert_base_seq128 --precisions int8 --precision-batches 32 --precision-extra ""
    bench --part precision --models resnet50 --precisions int8,int8-spec --precision-batches 32 --precision-extra ""
    bench --part dynamic --models resnet50,bert_base_seq128
    smoke control_flow 40
    smoke trees 60
    smoke int8_layers 90
    smoke build_time 120
    smoke transformer_build 90
    smoke contrib_ops 40
    ;;
  *) echo "usage: bash bench/h200_session.sh RECORD|ZOO_PRECISION|VERIFY|PRECISION LABEL [fp16[,fp32] | seconds]" >&2; exit 2 ;;
esac
echo "command $1 done in ${SECONDS} s"
