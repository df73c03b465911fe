#!/bin/bash
# The runs of record on the H200, as two device commands of < 10 minutes each (bench/README.md "Runs of record").
#   bash bench/h200_session.sh A "<label>"   fp16 rows of the four CNNs and ViT + the GELU case + build costs
#   bash bench/h200_session.sh B "<label>"   fp16 rows of BERT and GPT-2 (merged with A's file, which this
#                                            command finds in bench/results/), precision rows (resnet50 INT8 b32 and
#                                            b256; BERT INT8/FP8 b32; resnet50 INT8 with the debug-precision spec b32)
#   bash bench/h200_session.sh C "<label>" S  in S seconds (what the budget leaves): the dynamic-shape rows, control
#                                            flow, BERT `best` b1, the torch.compile-backend smoke
# Each step gets the seconds left of a 570 s allowance as its --budget-s, so the command ends in time whatever the
# estimates' error; what does not fit is listed under "Not run" in the results. Writes everything under $OUT.
set -u
export PYTHONPATH=.
LABEL="$2"
LIMIT=570
left() { echo $(( LIMIT - SECONDS )); }
bench() { python3 bench/run.py "$@" --out-dir "$OUT" --label "$LABEL" --budget-s "$(( $(left) - 15 ))"; echo "bench rc=$?"; }
smoke() { local name=$1 t=$2; [ "$t" -gt 5 ] && [ "$(left)" -ge "$t" ] || { echo "smoke $name: no time left"; return; }
          timeout "$t" python3 "bench/gpu_smoke/$name.py" > "$OUT/smoke-$name.txt" 2>&1; echo "smoke $name rc=$?"; }
case "$1" in
  A)
    bench --part fp16 --models resnet50,mobilenet_v3_large,efficientnet_b0,convnext_tiny,vit_b_16
    ;;
  B)
    cp bench/results/nvidia-h200.json "$OUT/"
    bench --part fp16 --skip gelu --models bert_base_seq128,gpt2_seq128 --append
    bench --part precision --models resnet50 --precisions int8 --precision-batches 32 \
          --precision-extra resnet50:256 --append
    bench --part precision --models bert_base_seq128 --precisions int8,fp8 --precision-batches 32 \
          --precision-extra "" --append
    bench --part precision --models resnet50 --precisions int8-spec --precision-batches 32 --precision-extra "" \
          --append
    ;;
  C)  # what the budget leaves after A and B (S seconds): the dynamic-shape rows, control flow on CUDA through the
      # body programs, BERT's `best` engine at batch 1, the torch.compile-backend smoke (lines so far are kept)
    LIMIT=${3:-170}
    cp bench/results/nvidia-h200.json "$OUT/"
    bench --part dynamic --models resnet50,bert_base_seq128 --append
    smoke control_flow 40
    bench --part precision --models bert_base_seq128 --precisions best --precision-batches 1 --precision-extra "" \
          --append
    smoke torch_compile_backend $(( $(left) - 10 ))
    ;;
  *) echo "usage: bash bench/h200_session.sh A|B|C LABEL [seconds]" >&2; exit 2 ;;
esac
echo "command $1 done in ${SECONDS} s"
