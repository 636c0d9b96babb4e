#!/bin/sh
# Resolves the MLflow image's packages (docker/mlflow.lock) for the image's Python (3.11, x86_64
# Linux) without installing anything: pip's resolver, its report, one `name==version` a line.
set -eu
cd "$(dirname "$0")"
report=$(mktemp)
pip install --dry-run --ignore-installed --quiet --report "$report" --target "$(mktemp -d)" \
    --implementation cp --python-version 3.11 --abi cp311 --abi abi3 --abi none --only-binary=:all: \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 --platform linux_x86_64 \
    "mlflow[auth]==3.17.2" "psycopg2-binary==2.9.13" "boto3==1.44.5"
{
    sed -n '1,/^$/p' mlflow.lock | grep '^#'
    python3 -c 'import json, sys
rows = sorted((i["metadata"]["name"].lower().replace("_", "-"), i["metadata"]["version"]) for i in json.load(open(sys.argv[1]))["install"])
print("".join(f"{n}=={v}\n" for n, v in rows), end="")' "$report"
} > mlflow.lock.new
mv mlflow.lock.new mlflow.lock
rm -f "$report"
