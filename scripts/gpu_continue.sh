#!/usr/bin/env bash
# Continue training the shipped default model on a lent GPU machine, on the permissively licensed
# code installed there (its image holds torch, transformers, jax, scipy, pandas, ...: no corpus
# travels), and hand the weights back in pieces that the device tool returns (at most 8 files of
# at most 16 MiB). One call that ends within END_BY minutes (the tool's limit is 10): reading the
# installed code and tokenizing CODE_CHARS characters of it, training for what is left (at most
# MINUTES), the held-out losses, the pieces.
#
# INIT: the model continued (default: the shipped one), or a carried folder holding a model
# whose weights are gzipped (model.safetensors.gz) so that it travels within the tool's 64 MiB.
#
# Here, once (lark is the one package the image lacks; .v2: the candidate model, see docs/models.md):
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 -d .whl lark==1.3.1
# The device call (the device tool's run, 600 s at most):
#   command: INIT=.v2 bash scripts/gpu_continue.sh      carry: [".whl", ".v2"]      timeout_s: 600
# Here, afterwards (FILES: the call's files_at folder; DIR: a new model directory to judge; the
# tokenizer, which training keeps, comes from INIT):
#   bash scripts/gpu_continue.sh --join FILES DIR [INIT]
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--join" ]; then
    files=${2:?usage: gpu_continue.sh --join FILES DIR}
    dir=${3:?usage: gpu_continue.sh --join FILES DIR}
    init=${4:-fimconstrain/default_model}
    mkdir -p "$dir"
    cp "$init"/{tokenizer.json,tokenizer_config.json,generation_config.json} "$dir"/
    cp "$files"/{config.json,training.json,code.manifest.jsonl.gz} "$dir"/
    cat "$files"/model.safetensors.part* > "$dir"/model.safetensors
    (cd "$dir" && sha256sum -c "$files"/model.safetensors.sha256)
    python3 scripts/train_default_model.py --card "$dir"
    exit 0
fi

: "${OUT:?OUT: the folder whose files come back (the device tool sets it)}"
MINUTES=${MINUTES:-8}           # training at most
END_BY=${END_BY:-9}             # the training script's whole run; the call stays under 10 minutes
CODE_CHARS=${CODE_CHARS:-1e8}  # characters read and tokenized before training starts
BATCH=${BATCH:-64}
INIT=${INIT:-fimconstrain/default_model}
work=$(mktemp -d)
if [ -f "$INIT"/model.safetensors.gz ]; then
    mkdir "$work"/init
    cp "$INIT"/*.json "$work"/init/
    gunzip -c "$INIT"/model.safetensors.gz > "$work"/init/model.safetensors
    INIT=$work/init
fi
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site
fi
site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
PYTHONUNBUFFERED=1 python3 scripts/train_default_model.py --init "$INIT" \
    --code "$site" --code-chars "$CODE_CHARS" --code-per-distribution 6e6 --minutes "$MINUTES" \
    --end-by "$END_BY" --batch-size "$BATCH" --lr 5e-4 --fim-rate 0.7 --spm-rate 0.5 --eval-minutes 1 \
    --checkpoint-minutes 1000 --seed 1 --manifest "$OUT"/code.manifest.jsonl.gz --out "$work"/model \
    2>&1 | tee "$OUT"/train.log
cp "$work"/model/{config.json,training.json} "$OUT"/
split -b 15M -d "$work"/model/model.safetensors "$OUT"/model.safetensors.part
(cd "$work"/model && sha256sum model.safetensors) > "$OUT"/model.safetensors.sha256
ls -l "$OUT"
