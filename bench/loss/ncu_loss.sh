#!/bin/sh
# ncu_loss.sh -- ncu on BERT-Large's MLM loss rows kernel (bert_mlm_rows.evt: the padded logits plus the
# head's bias and gemm-pad's mask, trained with --loss cross_entropy), on the GPU machine after
# `sh bench/ab.sh prepare BASE` here, through bench/ncu_kernel.sh.  Logs in $OUT.
#   run(command="sh bench/loss/ncu_loss.sh", carry=[".gpu-ab"])
set -u
ab=.gpu-ab
tar -xzf $ab/b/stage.tgz -C $ab/b
export LD_LIBRARY_PATH="$PWD/$ab/b/lib" XDG_CACHE_HOME=/tmp/cache-ncu
# the rows kernel is named after its first node's op (k_add); its first launch is a warm-up
NCU_SKIP=1 sh bench/ncu_kernel.sh loss '^k_add$' $ab/b/bin/evtc explain bench/loss/bert_mlm_rows.evt --train \
  --target h200 --loss cross_entropy --labels labels --profile 3
