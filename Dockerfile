# Container images for toolsweep on Kubernetes (k8s/, docs/deploy.md).
#
#   docker build -t REGISTRY/toolsweep:0.1.0 .                       every Ray pod: head, CPU and GPU workers
#   docker build --target mlflow -t REGISTRY/toolsweep-mlflow:0.1.0 .  the MLflow tracking server
#
# The toolsweep image installs the project exactly as the README does, with the `gpu` extra (vLLM's
# CUDA build) instead of `dev`; the driver, rollout workers and vLLM replicas all run from it. Model
# weights are not baked in: they come from the read-only /models volume.

# --- MLflow tracking server -----------------------------------------------------------------------
# The official MLflow image has neither the PostgreSQL driver nor boto3; the server needs both (backend
# store and S3 artifact proxy). Same MLflow version as the project pins.
FROM python:3.11-slim AS mlflow
RUN pip install --no-cache-dir "mlflow==3.17.2" "psycopg2-binary>=2.9" "boto3>=1.34"
EXPOSE 5000
ENTRYPOINT []
CMD ["mlflow", "server", "--host", "0.0.0.0", "--port", "5000"]

# --- toolsweep (default target) -------------------------------------------------------------------
# CUDA runtime only: vLLM's wheels bring their own CUDA libraries (nvidia-* packages) and need no
# compiler; the runtime image supplies the driver-facing pieces the GPU operator expects.
FROM nvidia/cuda:12.8.1-runtime-ubuntu24.04 AS toolsweep

ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH

# wget: KubeRay's default readiness/liveness probes of Ray pods call it. git: the run manifest
# records the code's commit when it can.
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv python3-dev wget git ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv $VIRTUAL_ENV \
    && pip install --upgrade pip

WORKDIR /opt/toolsweep
COPY pyproject.toml README.md ./
COPY toolsweep ./toolsweep
COPY configs ./configs
RUN pip install -e ".[gpu]"

# A sweep's run directories go to /runs (a volume on the head pod); configs come from /config.
WORKDIR /runs
CMD ["toolsweep", "--help"]
