# Container images for toolsweep on Kubernetes (k8s/, docs/deploy.md). Tags are immutable: the version
# and the commit.
#
#   SHA=$(git rev-parse --short=12 HEAD)
#   docker build --build-arg GIT_SHA=$(git rev-parse HEAD) -t $REGISTRY/toolsweep:0.1.0-$SHA .
#   docker build --target mlflow -t $REGISTRY/toolsweep-mlflow:0.1.0-$SHA .
#
# The toolsweep image runs every Ray pod: the driver, the rollout workers and the vLLM replicas. Model
# weights are not baked in: they come from the read-only /models volume.

# --- MLflow tracking server -----------------------------------------------------------------------
# The official MLflow image has neither the PostgreSQL driver nor boto3; the server needs both (backend
# store and S3 artifact proxy), and the auth extra for `--app-name basic-auth`. Same MLflow version as
# the project pins. Every package comes from the lock (docker/mlflow.lock, resolved from
# mlflow[auth]==3.17.2, psycopg2-binary==2.9.13 and boto3==1.44.5), installed without resolving again.
FROM python:3.11-slim AS mlflow
COPY docker/mlflow.lock /tmp/mlflow.lock
# uid 1000 whatever the base has there (docker/add-user.sh).
COPY docker/add-user.sh /tmp/add-user.sh
RUN pip install --no-cache-dir --no-deps -r /tmp/mlflow.lock \
    && sh /tmp/add-user.sh / \
    && rm /tmp/add-user.sh /tmp/mlflow.lock
USER 1000
EXPOSE 5000
ENTRYPOINT []
CMD ["mlflow", "server", "--host", "0.0.0.0", "--port", "5000"]

# --- toolsweep (default target) -------------------------------------------------------------------
# CUDA comes from one place: the CUDA 13.0.3 wheels torch 2.13.0 itself pins (its requirement
# cuda-toolkit[cublas,cudart,...]==13.0.3), installed into the virtualenv under nvidia/cu13/, plus
# that same toolkit's compiler and headers (the nvcc, cccl and crt extras), which vLLM's kernels
# compile against at run time (Triton needs gcc; FlashInfer's JIT needs nvcc and the nvrtc and cuBLAS
# headers). The base is plain Ubuntu 24.04 (Python 3.12), not a CUDA image: no second copy of the
# libraries and no second nvcc. The nodes need an NVIDIA driver >= 580 (CUDA 13.0).
FROM ubuntu:24.04 AS toolsweep

ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    VIRTUAL_ENV=/opt/venv \
    CUDA_HOME=/opt/venv/lib/python3.12/site-packages/nvidia/cu13 \
    PATH=/opt/venv/bin:/opt/venv/lib/python3.12/site-packages/nvidia/cu13/bin:$PATH \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    HF_HUB_OFFLINE=1

# wget: KubeRay's default readiness/liveness probes of Ray pods call it.
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        python3 python3-venv python3-dev build-essential wget ca-certificates libnuma-dev \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv $VIRTUAL_ENV \
    && pip install --upgrade pip

# The dependencies first, read from pyproject.toml (the project's own and the `gpu` extra), with the
# CUDA toolkit's compiler and headers at the version torch pins: they change rarely and weigh
# gigabytes, so a code change rebuilds only the layers below.
WORKDIR /opt/toolsweep
COPY pyproject.toml ./
RUN python3 -c 'import tomllib; p = tomllib.load(open("pyproject.toml", "rb"))["project"]; print("\n".join(p["dependencies"] + p["optional-dependencies"]["gpu"]))' > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt "cuda-toolkit[nvcc,cccl,crt]==13.0.3" \
    && rm /tmp/requirements.txt \
    && nvcc --version

# Then the project itself, installed (not editable) without touching the dependencies.
COPY README.md ./
COPY toolsweep ./toolsweep
COPY configs ./configs
# The user: uid 1000, which the Ubuntu base already gives to `ubuntu` (docker/add-user.sh takes it over).
COPY docker/add-user.sh /tmp/add-user.sh
RUN pip install --no-deps . \
    && sh /tmp/add-user.sh / \
    && rm /tmp/add-user.sh \
    && mkdir -p /runs && chown 1000:1000 /runs

# The commit the image was built from; every run's manifest records it as git_sha.
ARG GIT_SHA=""
ENV TOOLSWEEP_GIT_SHA=${GIT_SHA} \
    HOME=/home/toolsweep
LABEL org.opencontainers.image.revision=${GIT_SHA} \
      org.opencontainers.image.source="toolsweep"

# A non-root user, by number so that Kubernetes' runAsNonRoot can verify it. The pods mount writable
# volumes at /tmp and $HOME (the root filesystem is read-only); sweeps' run directories go to /runs.
USER 1000
WORKDIR /runs
CMD ["toolsweep", "--help"]
